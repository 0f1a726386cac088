package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/redact"
)

// printer writes responses on stdout and failures on stderr: redacted by the gateway's
// rules (unless show is set) and scrubbed of every secret value of the requests.
type printer struct {
	out, errOut io.Writer
	redactor    *redact.Redactor
	scrubber    *redact.Scrubber
	show        bool
}

func newPrinter(cmd *cobra.Command, show bool, calls []outgoing) *printer {
	r := redact.NewRedactor()
	var values []string
	for _, c := range calls {
		values = append(values, r.SecretValues(c.req)...) // the Scrubber adds their JSON escapes
	}
	return &printer{out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), redactor: r, scrubber: redact.NewScrubber(values), show: show}
}

// json renders a response: indented, or on one line for a stream. protojson varies its
// whitespace on purpose, so the layout is redone with encoding/json to keep it stable.
func (p *printer) json(m proto.Message, indent bool) ([]byte, error) {
	if !p.show {
		m = p.redactor.Redact(m)
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("rendering the response as JSON: %w", err)
	}
	var out bytes.Buffer
	if indent {
		err = json.Indent(&out, b, "", "  ")
	} else {
		err = json.Compact(&out, b)
	}
	if err != nil {
		return nil, fmt.Errorf("rendering the response as JSON: %w", err)
	}
	return []byte(p.scrubber.Scrub(out.String())), nil
}

func (p *printer) write(b []byte) error {
	if _, err := p.out.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing the response: %w", err)
	}
	return nil
}

// failed prints a failed call as "csi-gateway call: <Method>: <CODE>: <message>" and returns
// its gRPC code as the exit status.
func (p *printer) failed(m method, err error) error {
	return p.report(m, err, "")
}

func (p *printer) report(m method, err error, note string) error {
	st := status.Convert(err)
	fmt.Fprintf(p.errOut, "csi-gateway call: %s: %s: %s%s\n", m.name(), code.Code(st.Code()), p.scrubber.Scrub(st.Message()), note)
	c := int(st.Code())
	if c < 1 || c > 16 { // not a code a server may send; keep the exit status meaningful
		c = int(codes.Unknown)
	}
	return exitError{code: c}
}

// stream makes a server-streaming call and prints each message on its own line (NDJSON).
func (p *printer) stream(ctx context.Context, conn *grpc.ClientConn, c outgoing) error {
	desc := &grpc.StreamDesc{StreamName: c.method.name(), ServerStreams: true}
	s, err := conn.NewStream(ctx, desc, c.method.full)
	if err != nil {
		return p.failed(c.method, err)
	}
	// A failed send reports io.EOF; the call's status then comes from RecvMsg.
	if err := s.SendMsg(c.req); err != nil && !errors.Is(err, io.EOF) {
		return p.failed(c.method, err)
	}
	if err := s.CloseSend(); err != nil {
		return p.failed(c.method, err)
	}
	for {
		resp := c.method.newMessage(c.method.desc.Output())
		if err := s.RecvMsg(resp); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return p.failed(c.method, err)
		}
		b, err := p.json(resp, false)
		if err != nil {
			return err
		}
		if err := p.write(b); err != nil {
			return err
		}
	}
}

// id prints only the ID of the object a response holds: the first string field named *_id
// of its first message field that has one (CreateVolume's volume.volume_id, CreateSnapshot's
// snapshot.snapshot_id, a group's group_snapshot_id or volume_group_id). IDs are not
// secrets, and are printed as they are.
func (p *printer) id(m method, resp proto.Message) error {
	fields := resp.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Kind() != protoreflect.MessageKind || fd.IsList() || fd.IsMap() || !resp.ProtoReflect().Has(fd) {
			continue
		}
		obj := resp.ProtoReflect().Get(fd).Message()
		inner := obj.Descriptor().Fields()
		for j := range inner.Len() {
			if f := inner.Get(j); f.Kind() == protoreflect.StringKind && !f.IsList() && strings.HasSuffix(string(f.Name()), "_id") && obj.Get(f).String() != "" {
				return p.write([]byte(obj.Get(f).String()))
			}
		}
	}
	return usagef("--output id: a %s response holds no object ID; use --output json", m.name())
}
