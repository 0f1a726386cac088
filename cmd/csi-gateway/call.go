package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	// The services `call` knows, registered in the protobuf registry.
	"github.com/container-storage-interface/spec/lib/go/csi"
	_ "github.com/csi-addons/spec/lib/go/volumegroup"

	"github.com/csi-gateway/csi-gateway/proxy"
)

// exitUsage is the exit status of a usage error (EX_USAGE of sysexits.h): a bad flag,
// method, JSON request or input file. A failed call exits with its gRPC code, 1 to 16.
const exitUsage = 64

const callLong = `Call one method of a CSI driver, or of the gateway in front of it, and print the
response as JSON.

The method is Service/Method; the package may be left out, and a bare service is looked up
in csi.v1 first, then in volumegroup (csi-addons): Controller/CreateVolume,
csi.v1.Controller/CreateVolume, /csi.v1.Controller/CreateVolume,
volumegroup.Controller/CreateVolumeGroup. The request is JSON in the protobuf mapping
(camelCase or proto field names), given as the argument, as @file, or as - for stdin; no
request sends an empty one. Streaming methods (SnapshotMetadata) print one JSON object per
line. The commands below are short forms of common calls that need no JSON.

--secrets-file fills the request's secrets field from a YAML or JSON map of key: value, or
from a csi-sanity secrets file (CreateVolumeSecret: {key: value}, ...). Secrets are never
printed: the response is redacted by the gateway's rules (secret fields, mount flags, volume
and publish context values) and every secret value is scrubbed from the output and from
error messages. --show-secrets turns the redaction of the response off, for debugging on a
trusted terminal; the secret values sent in the request stay scrubbed.

The connection is plain (insecure): use a Unix socket, or TCP on a trusted network.

Exit status: 0 success; 1-16 the gRPC code of the failed call (4 DEADLINE_EXCEEDED,
5 NOT_FOUND, 12 UNIMPLEMENTED, 14 UNAVAILABLE, ...); 64 a usage error: a bad flag, method,
JSON request or input file.`

const callExample = `  export CSI_ENDPOINT=unix:///run/csi/csi.sock
  csi-gateway call Identity/GetPluginInfo
  csi-gateway call Controller/CreateVolume '{"name":"pvc-1","volumeCapabilities":[{"mount":{},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}]}'
  csi-gateway call Controller/ListVolumes @request.json
  csi-gateway call create-volume pvc-1 --size 1Gi --secrets-file secrets.yaml`

// callOptions are the flags shared by `csi-gateway call` and its short forms.
type callOptions struct {
	endpoint    string
	timeout     time.Duration
	secretsFile string
	showSecrets bool
}

func newCallCommand() *cobra.Command {
	o := &callOptions{}
	cmd := &cobra.Command{
		Use:     "call [flags] <Service>/<Method> ['<json>'|@file|-]",
		Short:   "Call any CSI method with a JSON request and print the response, secrets redacted",
		Long:    callLong,
		Example: callExample,
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return finish(cmd, o.runGeneric(cmd, args))
		},
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.endpoint, "endpoint", "", "CSI endpoint: unix:///path.sock or tcp://host:port (default $CSI_ENDPOINT)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "deadline of the call (0: none)")
	f.StringVar(&o.secretsFile, "secrets-file", "", "YAML or JSON file of secrets (key: value) to put in the request's secrets field")
	f.BoolVar(&o.showSecrets, "show-secrets", false, "print the response unredacted (volume and publish context, mount flags)")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return finish(c, usageError{err.Error()}) })
	for _, a := range callAliases {
		cmd.AddCommand(a.command(o))
	}
	return cmd
}

// runGeneric is `call <Service>/<Method> [request]`.
func (o *callOptions) runGeneric(cmd *cobra.Command, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return usagef("want <Service>/<Method> and at most one request ('<json>', @file or -); see csi-gateway call --help")
	}
	m, err := resolveMethod(args[0])
	if err != nil {
		return err
	}
	var text []byte
	if len(args) == 2 {
		if text, err = readRequest(args[1], cmd.InOrStdin()); err != nil {
			return err
		}
	}
	req, err := m.parseRequest(text)
	if err != nil {
		return err
	}
	return o.send(cmd, []outgoing{{method: m, req: req}})
}

// usageError is a mistake in the command line or one of its inputs. finish prints it and
// turns it into exitUsage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// finish prints a usage error on stderr and returns its exit status; other errors pass
// through unchanged (a failed call has already been printed as an exitError).
func finish(cmd *cobra.Command, err error) error {
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(cmd.ErrOrStderr(), "csi-gateway call: %s\n", ue.msg)
		return exitError{code: exitUsage}
	}
	return err
}

// outgoing is one request to send. key names its member in a combined output (caps); it is
// empty for a single call, whose response is printed as it is.
type outgoing struct {
	key    string
	method method
	req    proto.Message
}

// send fills in the secrets, makes the calls in order and prints the responses. A failed
// call is printed on stderr, scrubbed, and returned as exitError with its gRPC code.
func (o *callOptions) send(cmd *cobra.Command, calls []outgoing) error {
	ep, err := o.target()
	if err != nil {
		return err
	}
	for _, c := range calls {
		if c.method.desc.IsStreamingClient() {
			return usagef("%s streams requests; call sends exactly one request", c.method.full)
		}
		if err := o.fillSecrets(c.method, c.req); err != nil {
			return err
		}
	}
	p := newPrinter(cmd, o.showSecrets, calls)
	creds, err := transportCredentials(o)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(dialTarget(ep), grpc.WithTransportCredentials(creds))
	if err != nil {
		return usagef("--endpoint %s: %v", ep, err)
	}
	defer conn.Close()
	ctx := cmd.Context()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}

	if len(calls) == 1 && calls[0].method.desc.IsStreamingServer() {
		return p.stream(ctx, conn, calls[0])
	}
	combined := map[string]json.RawMessage{}
	for _, c := range calls {
		resp := c.method.newMessage(c.method.desc.Output())
		if err := conn.Invoke(ctx, c.method.full, c.req, resp); err != nil {
			if c.key != "" && status.Code(err) == codes.Unimplemented {
				p.report(c.method, err, " (left out)") // a service the driver does not offer
				continue
			}
			return p.failed(c.method, err)
		}
		b, err := p.json(resp, c.key == "")
		if err != nil {
			return err
		}
		if c.key == "" {
			return p.write(b)
		}
		combined[c.key] = b
	}
	b, err := json.MarshalIndent(combined, "", "  ")
	if err != nil {
		return err
	}
	return p.write(b)
}

// target is the endpoint from --endpoint or, failing that, CSI_ENDPOINT.
func (o *callOptions) target() (proxy.Endpoint, error) {
	s, from := o.endpoint, "--endpoint"
	if s == "" {
		s, from = os.Getenv("CSI_ENDPOINT"), "CSI_ENDPOINT"
	}
	if s == "" {
		return proxy.Endpoint{}, usagef("no endpoint: pass --endpoint unix:///path.sock or set CSI_ENDPOINT")
	}
	ep, err := proxy.ParseEndpoint(s)
	if err != nil {
		return proxy.Endpoint{}, usagef("%s: %v", from, err)
	}
	return ep, nil
}

// transportCredentials secures the connection. It is insecure for now: Unix sockets and
// plain TCP. TLS flags (--tls-ca, --tls-cert, --tls-key) plug in here, building their
// credentials from tlsconf.
func transportCredentials(*callOptions) (credentials.TransportCredentials, error) {
	return insecure.NewCredentials(), nil
}

// dialTarget is the gRPC target of an endpoint: unix:///path, or host:port through DNS.
func dialTarget(ep proxy.Endpoint) string {
	if ep.Scheme == "unix" {
		return ep.String()
	}
	return "dns:///" + ep.Address
}

// fillSecrets puts the secrets of --secrets-file, if any, into every field of req that
// carries the csi_secret option, over any the JSON request set for the same keys. A request
// without such a field is a usage error.
func (o *callOptions) fillSecrets(m method, req proto.Message) error {
	if o.secretsFile == "" {
		return nil
	}
	secrets, err := loadSecrets(o.secretsFile, m.name())
	if err != nil {
		return err
	}
	r := req.ProtoReflect()
	fields := r.Descriptor().Fields()
	found := false
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !fd.IsMap() || fd.MapValue().Kind() != protoreflect.StringKind {
			continue
		}
		if secret, _ := proto.GetExtension(fd.Options(), csi.E_CsiSecret).(bool); !secret {
			continue
		}
		found = true
		mp := r.Mutable(fd).Map()
		for k, v := range secrets {
			mp.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString(v))
		}
	}
	if !found {
		return usagef("--secrets-file: %s takes no secrets (its request %s has no secrets field)", m.name(), m.desc.Input().FullName())
	}
	return nil
}

// loadSecrets reads a secrets file: a flat map of key: value, or csi-sanity's form with one
// section per method (CreateVolumeSecret: {key: value}), from which the method's is taken.
// Errors never quote the file's content.
func loadSecrets(path, methodName string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--secrets-file: %v", err)
	}
	var flat map[string]string
	err = yaml.Unmarshal(data, &flat)
	if err == nil {
		return flat, nil
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) { // a syntax error: it names a line, not a value
		return nil, usagef("--secrets-file %s: %v", path, err)
	}
	var sections map[string]map[string]string
	if err := yaml.Unmarshal(data, &sections); err != nil {
		// A type error would quote the offending value, which may be a secret.
		return nil, usagef("--secrets-file %s: want a map of key: value, or csi-sanity's sections of them (CreateVolumeSecret: {key: value})", path)
	}
	for _, name := range []string{methodName + "Secret", "Controller" + methodName + "Secret"} {
		if s, ok := sections[name]; ok {
			return s, nil
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range sections {
			if !yield(k) {
				return
			}
		}
	})
	return nil, usagef("--secrets-file %s: no %sSecret section (it has %s)", path, methodName, strings.Join(names, ", "))
}

// readRequest returns the request text: the argument itself, the file named after "@", or
// stdin for "-".
func readRequest(arg string, stdin io.Reader) ([]byte, error) {
	switch {
	case arg == "-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, usagef("reading the request from stdin: %v", err)
		}
		return b, nil
	case strings.HasPrefix(arg, "@"):
		b, err := os.ReadFile(arg[1:])
		if err != nil {
			return nil, usagef("request: %v", err)
		}
		return b, nil
	default:
		return []byte(arg), nil
	}
}

// printer writes responses on stdout and failures on stderr: redacted by the gateway's
// rules (unless show is set) and scrubbed of every secret value of the requests.
type printer struct {
	out, errOut io.Writer
	redactor    *proxy.Redactor
	scrubber    *proxy.Scrubber
	show        bool
}

func newPrinter(cmd *cobra.Command, show bool, calls []outgoing) *printer {
	r := proxy.NewRedactor()
	var values []string
	for _, c := range calls {
		values = append(values, r.SecretValues(c.req)...) // the Scrubber adds their JSON escapes
	}
	return &printer{out: cmd.OutOrStdout(), errOut: cmd.ErrOrStderr(), redactor: r, scrubber: proxy.NewScrubber(values), show: show}
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

// method is a method resolved through the protobuf registry.
type method struct {
	full string // "/csi.v1.Controller/CreateVolume", as gRPC names it
	desc protoreflect.MethodDescriptor
}

func (m method) name() string { return string(m.desc.Name()) }

// newMessage returns an empty message of type d: the registered Go type, or a dynamic one.
func (method) newMessage(d protoreflect.MessageDescriptor) proto.Message {
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName()); err == nil {
		return mt.New().Interface()
	}
	return dynamicpb.NewMessage(d)
}

// parseRequest decodes a JSON request; blank text is an empty request.
func (m method) parseRequest(text []byte) (proto.Message, error) {
	req := m.newMessage(m.desc.Input())
	if len(bytes.TrimSpace(text)) == 0 {
		return req, nil
	}
	if err := protojson.Unmarshal(text, req); err != nil {
		return nil, usagef("request for %s is not a valid %s in JSON: %s", m.name(), m.desc.Input().FullName(),
			strings.TrimLeft(strings.TrimPrefix(err.Error(), "proto:"), " \u00a0")) // protojson varies that space
	}
	return req, nil
}

// callPackages are the proto packages `call` knows, in the order a bare service name is
// looked up in them.
var callPackages = []string{"csi.v1", "volumegroup"}

// resolveMethod finds Service/Method in the registry. The package is optional, and so is a
// leading slash. An unknown method is a usage error that names close matches.
func resolveMethod(s string) (method, error) {
	service, name, ok := strings.Cut(strings.TrimPrefix(s, "/"), "/")
	if !ok || service == "" || name == "" || strings.Contains(name, "/") {
		return method{}, usagef("method %q: want <Service>/<Method>, e.g. Controller/CreateVolume", s)
	}
	services := []string{service}
	if !strings.Contains(service, ".") {
		services = nil
		for _, p := range callPackages {
			services = append(services, p+"."+service)
		}
	}
	for _, sv := range services {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(sv))
		if err != nil {
			continue
		}
		if sd, ok := d.(protoreflect.ServiceDescriptor); ok {
			if md := sd.Methods().ByName(protoreflect.Name(name)); md != nil {
				return method{full: "/" + sv + "/" + name, desc: md}, nil
			}
		}
	}
	if near := closeMatches(service, name); len(near) > 0 {
		return method{}, usagef("unknown method %q; did you mean %s?", s, strings.Join(near, " or "))
	}
	return method{}, usagef("unknown method %q; the services are %s", s, strings.Join(knownServices(), ", "))
}

// knownMethods lists Service/Method for every method of callPackages, sorted.
func knownMethods() []string {
	var out []string
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !slices.Contains(callPackages, string(fd.Package())) {
			return true
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				out = append(out, string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name()))
			}
		}
		return true
	})
	slices.Sort(out)
	return out
}

func knownServices() []string {
	var out []string
	for _, m := range knownMethods() {
		s, _, _ := strings.Cut(m, "/")
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// closeMatches returns up to five known methods that look like service/name: a name a few
// edits away or containing it, preferably in a service of the same name.
func closeMatches(service, name string) []string {
	type match struct {
		m string
		d int
	}
	var found []match
	want := strings.ToLower(name)
	wantService := "." + strings.ToLower(service[strings.LastIndex(service, ".")+1:])
	for _, m := range knownMethods() {
		sv, n, _ := strings.Cut(strings.ToLower(m), "/")
		d := editDistance(want, n)
		if len(want) >= 4 && strings.Contains(n, want) {
			d = min(d, 1)
		}
		if !strings.HasSuffix(sv, wantService) {
			d++
		}
		if d <= max(2, len(want)/4) {
			found = append(found, match{m, d})
		}
	}
	slices.SortFunc(found, func(a, b match) int { return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.m, b.m)) })
	var out []string
	for _, f := range found[:min(len(found), 5)] {
		out = append(out, f.m)
	}
	return out
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
