package h2grpc

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// frameHeaderLen is the size of an HTTP/2 frame header.
const frameHeaderLen = 9

// headerReader decodes a connection's header blocks (a HEADERS frame and its CONTINUATION
// frames) into a MetaHeadersFrame, as x/net's Framer does when ReadMetaHeaders is set: the
// same size limits, field checks and errors. It exists because that path allocates a frame,
// a closure and the closure's state for every block, a tenth of a relayed call's allocations;
// this one reuses its frame and field list, so a MetaHeadersFrame it returns is valid only
// until the connection reads the next frame. The reader goroutine owns it.
type headerReader struct {
	fr      *http2.Framer
	dec     *hpack.Decoder
	maxList uint32 // SETTINGS_MAX_HEADER_LIST_SIZE we announced
	mh      http2.MetaHeadersFrame

	// State of the block being decoded, for emit.
	headersRemain, trailersRemain uint32
	sawRegular                    bool
	invalid                       error
}

func (r *headerReader) init(fr *http2.Framer, maxList uint32) {
	r.fr, r.maxList = fr, maxList
	r.dec = hpack.NewDecoder(4096, r.emit)
	r.dec.SetMaxStringLength(int(maxList))
}

// readFrame reads the next frame, completing a HEADERS frame with its CONTINUATION frames
// into a MetaHeadersFrame.
func (r *headerReader) readFrame() (http2.Frame, error) {
	f, err := r.fr.ReadFrame()
	if err != nil {
		return nil, err
	}
	if hf, ok := f.(*http2.HeadersFrame); ok {
		mh, err := r.read(hf)
		if err != nil {
			return nil, err // a nil Frame, not a nil *MetaHeadersFrame in one
		}
		return mh, nil
	}
	return f, nil
}

// read decodes the block hf starts (x/net's Framer.readMetaFrame, step by step).
func (r *headerReader) read(hf *http2.HeadersFrame) (*http2.MetaHeadersFrame, error) {
	clear(r.mh.Fields) // drop the previous block's strings
	r.mh = http2.MetaHeadersFrame{HeadersFrame: hf, Fields: r.mh.Fields[:0]}
	r.headersRemain, r.trailersRemain = r.maxList, r.maxList
	r.sawRegular, r.invalid = false, nil
	r.dec.SetEmitEnabled(true)
	frag, ended := hf.HeaderBlockFragment(), hf.HeadersEnded()
	// wire counts the block's frames, their headers too, so that CONTINUATION frames that
	// carry little or nothing cannot go on for ever (CVE-2024-27316's flood).
	wire := int64(frameHeaderLen + len(frag))
	for {
		// A block far over the limit, on the wire or decoded, or more of a block after an
		// invalid field, is not decoded: the connection is closed.
		if int64(len(frag)) > 2*int64(r.headersRemain+r.trailersRemain) || wire > 4*int64(r.maxList)+frameHeaderLen || r.invalid != nil {
			return nil, http2.ConnectionError(http2.ErrCodeProtocol)
		}
		if _, err := r.dec.Write(frag); err != nil {
			return nil, http2.ConnectionError(http2.ErrCodeCompression)
		}
		if ended {
			break
		}
		f, err := r.fr.ReadFrame()
		if err != nil {
			return nil, err
		}
		cf := f.(*http2.ContinuationFrame) // the Framer guarantees the order
		frag, ended = cf.HeaderBlockFragment(), cf.HeadersEnded()
		wire += int64(frameHeaderLen + len(frag))
	}
	if err := r.dec.Close(); err != nil {
		return nil, http2.ConnectionError(http2.ErrCodeCompression)
	}
	if r.invalid != nil {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: r.invalid}
	}
	if err := checkPseudos(r.mh.PseudoFields()); err != nil {
		return nil, http2.StreamError{StreamID: hf.StreamID, Code: http2.ErrCodeProtocol, Cause: err}
	}
	return &r.mh, nil
}

// emit takes one decoded field: it checks its name and value, and counts it against the
// header list limit (past which the block is Truncated and the rest dropped).
func (r *headerReader) emit(hf hpack.HeaderField) {
	if !httpguts.ValidHeaderFieldValue(hf.Value) {
		r.invalid = fmt.Errorf("invalid value of header field %q", hf.Name) // never the value: it may be a secret
	}
	if strings.HasPrefix(hf.Name, ":") {
		if r.sawRegular {
			r.invalid = fmt.Errorf("pseudo header field %q after a regular one", hf.Name)
		}
	} else {
		r.sawRegular = true
		if !validWireHeaderFieldName(hf.Name) {
			r.invalid = fmt.Errorf("invalid header field name %q", hf.Name)
		}
	}
	if r.invalid != nil {
		r.dec.SetEmitEnabled(false)
		return
	}
	remain, size := &r.headersRemain, hf.Size()
	if hf.Name == "trailer" {
		// As x/net counts it: every field the value names, at its name's length plus 32.
		n := uint32(strings.Count(hf.Value, ",") + 1)
		remain, size = &r.trailersRemain, uint32(len(hf.Value))-n+1+n*hpack.HeaderField{}.Size()
	}
	if size > *remain {
		r.dec.SetEmitEnabled(false)
		r.mh.Truncated = true
		r.headersRemain, r.trailersRemain = 0, 0
		return
	}
	*remain -= size
	r.mh.Fields = append(r.mh.Fields, hf)
}

// validWireHeaderFieldName: a token, in lower case (RFC 9113 §8.2.1).
func validWireHeaderFieldName(v string) bool {
	if v == "" {
		return false
	}
	for _, c := range v {
		if !httpguts.IsTokenRune(c) || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// checkPseudos: only known pseudo header fields, each at most once, and not those of a
// request and a response together.
func checkPseudos(pf []hpack.HeaderField) error {
	var isRequest, isResponse bool
	for i, hf := range pf {
		switch hf.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
			isRequest = true
		case ":status":
			isResponse = true
		default:
			return fmt.Errorf("invalid pseudo header field %q", hf.Name)
		}
		for _, prev := range pf[:i] {
			if hf.Name == prev.Name {
				return fmt.Errorf("duplicate pseudo header field %q", hf.Name)
			}
		}
	}
	if isRequest && isResponse {
		return fmt.Errorf("request and response pseudo header fields together")
	}
	return nil
}

// readFrames reads frames with hr and has handle act on each until reading or handling one
// fails with an error that is not a stream error, which it returns. A stream error goes to
// onStreamError, with the frame read (nil when reading it failed), and reading goes on.
func readFrames(hr *headerReader, handle func(http2.Frame) error, onStreamError func(http2.Frame, http2.StreamError)) error {
	for {
		f, err := hr.readFrame()
		if err == nil {
			err = handle(f)
		}
		if err == nil {
			continue
		}
		var se http2.StreamError
		if errors.As(err, &se) {
			onStreamError(f, se)
			continue
		}
		return err
	}
}
