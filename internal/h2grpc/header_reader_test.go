package h2grpc

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// headerBlockResult is what reading one frame gave: a header block's fields, or an error.
type headerBlockResult struct {
	Fields    []hpack.HeaderField
	Truncated bool
	Ended     bool
	Err       string
}

// readHeaderBlocks reads every frame of raw, as a connection's reader does (going on after a
// stream error), with read as the frame reader; it returns what each HEADERS frame gave.
func readHeaderBlocks(read func() (http2.Frame, error)) []headerBlockResult {
	var out []headerBlockResult
	for {
		f, err := read()
		var se http2.StreamError
		var ce http2.ConnectionError
		switch {
		case errors.As(err, &se):
			out = append(out, headerBlockResult{Err: fmt.Sprintf("stream error %v", se.Code)})
			continue
		case errors.As(err, &ce):
			return append(out, headerBlockResult{Err: fmt.Sprintf("connection error %v", http2.ErrCode(ce))})
		case err != nil:
			return append(out, headerBlockResult{Err: err.Error()})
		}
		if mh, ok := f.(*http2.MetaHeadersFrame); ok {
			out = append(out, headerBlockResult{
				Fields: append([]hpack.HeaderField(nil), mh.Fields...), Truncated: mh.Truncated, Ended: mh.StreamEnded(),
			})
		}
	}
}

// compareHeaderReaders reads raw with x/net's Framer (ReadMetaHeaders set) and with a
// headerReader, both with the header list limit maxList, and fails when they differ.
func compareHeaderReaders(t *testing.T, raw []byte, maxList uint32) []headerBlockResult {
	t.Helper()
	ref := http2.NewFramer(nil, bytes.NewReader(raw))
	ref.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	ref.MaxHeaderListSize = maxList
	want := readHeaderBlocks(ref.ReadFrame)

	var hr headerReader
	hr.init(http2.NewFramer(nil, bytes.NewReader(raw)), maxList)
	got := readHeaderBlocks(hr.readFrame)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("headerReader read\n%+v\nx/net's Framer read\n%+v", got, want)
	}
	return got
}

// headerFrames writes a HEADERS frame of stream id carrying block, split into CONTINUATION
// frames at each of splits (offsets into block).
func headerFrames(buf *bytes.Buffer, id uint32, block []byte, endStream bool, splits ...int) {
	fr := http2.NewFramer(buf, nil)
	ends := append(splits, len(block))
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block[:ends[0]], EndStream: endStream, EndHeaders: len(splits) == 0})
	for i := 1; i < len(ends); i++ {
		_ = fr.WriteContinuation(id, i == len(ends)-1, block[ends[i-1]:ends[i]])
	}
}

// encodeFields is an hpack block of name/value pairs, from enc (whose table the blocks of one
// connection share).
func encodeFields(enc *hpack.Encoder, buf *bytes.Buffer, kv ...string) []byte {
	buf.Reset()
	for i := 0; i < len(kv); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return append([]byte(nil), buf.Bytes()...)
}

// TestHeaderReaderMatchesFramer holds the headerReader to x/net's Framer, block by block, on
// good and bad header blocks of one connection.
func TestHeaderReaderMatchesFramer(t *testing.T) {
	var encBuf, raw bytes.Buffer
	enc := hpack.NewEncoder(&encBuf)
	request := []string{":method", "POST", ":scheme", "http", ":path", "/csi.v1.Identity/Probe", ":authority", "localhost",
		"content-type", "application/grpc", "te", "trailers", "grpc-timeout", "10S", "x-canary", "c4n4ry"}
	block := encodeFields(enc, &encBuf, request...)
	headerFrames(&raw, 1, block, false)
	headerFrames(&raw, 3, encodeFields(enc, &encBuf, request...), true, 2, 5) // CONTINUATION, table hits
	headerFrames(&raw, 5, encodeFields(enc, &encBuf, ":status", "200", "content-type", "application/grpc"), false)
	headerFrames(&raw, 5, encodeFields(enc, &encBuf, "grpc-status", "0", "grpc-message", ""), true)
	headerFrames(&raw, 7, encodeFields(enc, &encBuf, ":path", "/a", "X-Upper", "v"), true)                    // upper case name
	headerFrames(&raw, 9, encodeFields(enc, &encBuf, ":path", "/a", "x-bad", "v\x00"), true)                  // bad value
	headerFrames(&raw, 11, encodeFields(enc, &encBuf, "x-a", "1", ":path", "/a"), true)                       // pseudo after regular
	headerFrames(&raw, 13, encodeFields(enc, &encBuf, ":path", "/a", ":path", "/b"), true)                    // duplicate pseudo
	headerFrames(&raw, 15, encodeFields(enc, &encBuf, ":path", "/a", ":status", "200"), true)                 // request and response
	headerFrames(&raw, 17, encodeFields(enc, &encBuf, ":bogus", "1"), true)                                   // unknown pseudo
	headerFrames(&raw, 19, encodeFields(enc, &encBuf, "trailer", "a,a,a,a,a,a,a,a,a,a,a,a"), true)            // trailer accounting: 396 of 400
	headerFrames(&raw, 21, encodeFields(enc, &encBuf, "x-big", string(bytes.Repeat([]byte("z"), 380))), true) // over the limit: truncated
	headerFrames(&raw, 23, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, true)                                  // not hpack
	got := compareHeaderReaders(t, raw.Bytes(), 400)
	if len(got) != 13 || len(got[0].Fields) != len(request)/2 || got[0].Err != "" || !got[11].Truncated {
		t.Fatalf("the blocks did not read as the test expects (good, then each fault in turn):\n%+v", got)
	}
}

// TestHeaderReaderFarOverLimit: a block more than twice the header list limit closes the
// connection without being decoded.
func TestHeaderReaderFarOverLimit(t *testing.T) {
	var encBuf, raw bytes.Buffer
	enc := hpack.NewEncoder(&encBuf)
	headerFrames(&raw, 1, encodeFields(enc, &encBuf, ":path", "/a", "x-huge", string(bytes.Repeat([]byte("z"), 2000))), true, 5)
	got := compareHeaderReaders(t, raw.Bytes(), 300)
	if len(got) != 1 || got[0].Err != "connection error PROTOCOL_ERROR" {
		t.Fatalf("read %+v, want a connection error", got)
	}
}

// FuzzHeaderReader: on any header block, split anywhere, the headerReader reads what x/net's
// Framer reads, except where its own rule applies: a block whose frames take more than four
// times the header list limit on the wire ends the connection with PROTOCOL_ERROR before it is
// decoded (x/net's Framer has no such bound).
func FuzzHeaderReader(f *testing.F) {
	var encBuf bytes.Buffer
	enc := hpack.NewEncoder(&encBuf)
	f.Add(encodeFields(enc, &encBuf, ":method", "POST", ":path", "/x", "content-type", "application/grpc"), uint16(0), uint16(200))
	f.Add(encodeFields(enc, &encBuf, "trailer", "a,b", "X", "y"), uint16(3), uint16(64))
	f.Add([]byte{0x3f, 0xe1, 0x1f}, uint16(1), uint16(4096)) // a table size update
	f.Fuzz(func(t *testing.T, block []byte, split, maxList uint16) {
		var raw bytes.Buffer
		wire := frameHeaderLen + len(block)
		if s := int(split); s > 0 && s < len(block) {
			headerFrames(&raw, 1, block, true, s)
			wire += frameHeaderLen // its CONTINUATION
		} else {
			headerFrames(&raw, 1, block, true)
		}
		headerFrames(&raw, 3, block, false) // the same again, on the decoder's table as left
		limit := uint32(maxList) + 1
		if wire > 4*int(limit)+frameHeaderLen {
			// The bound is checked before each fragment is decoded: the headerReader reads
			// what x/net's Framer reads until a fragment takes the block past it, then closes
			// the connection.
			ref := http2.NewFramer(nil, bytes.NewReader(raw.Bytes()))
			ref.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			ref.MaxHeaderListSize = limit
			want := readHeaderBlocks(ref.ReadFrame)
			var hr headerReader
			hr.init(http2.NewFramer(nil, bytes.NewReader(raw.Bytes())), limit)
			got := readHeaderBlocks(hr.readFrame)
			closed := len(got) == 1 && got[0].Err == "connection error PROTOCOL_ERROR"
			if !closed && !reflect.DeepEqual(got, want) {
				t.Fatalf("a block of %d bytes on the wire, limit %d: read %+v, want the connection closed (PROTOCOL_ERROR) or what x/net's Framer read, %+v", wire, limit, got, want)
			}
			return
		}
		compareHeaderReaders(t, raw.Bytes(), limit)
	})
}
