package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

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
	output      string // outputJSON or outputID
}

// The forms of --output.
const (
	outputJSON = "json"
	outputID   = "id"
)

func newCallCommand() *cobra.Command {
	o := &callOptions{}
	cmd := subcommand("call [flags] <Service>/<Method> ['<json>'|@file|-]",
		"Call any CSI method with a JSON request and print the response, secrets redacted", cobra.ArbitraryArgs,
		func(cmd *cobra.Command, args []string) error {
			return finishUsage(cmd, "call", o.runGeneric(cmd, args))
		})
	cmd.Long, cmd.Example = callLong, callExample
	f := cmd.PersistentFlags()
	f.StringVar(&o.endpoint, "endpoint", "", "CSI endpoint: unix:///path.sock or tcp://host:port (default $CSI_ENDPOINT)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "deadline of the call (0: none)")
	f.StringVar(&o.secretsFile, "secrets-file", "", "YAML or JSON file of secrets (key: value) to put in the request's secrets field")
	f.BoolVar(&o.showSecrets, "show-secrets", false, "print the response unredacted (volume and publish context, mount flags)")
	f.StringVarP(&o.output, "output", "o", outputJSON, "json: the response as JSON; id: only the ID of the object the response holds (create-volume's volume ID, create-snapshot's snapshot ID…), for scripts: ID=$(csi-gateway call create-volume demo -o id)")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return finishUsage(c, "call", usageError{err.Error()}) })
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

// finishUsage prints a usage error of the subcommand name on stderr and returns exitUsage;
// other errors pass through unchanged (a failed call has already been printed as an
// exitError).
func finishUsage(cmd *cobra.Command, name string, err error) error {
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(cmd.ErrOrStderr(), "csi-gateway %s: %s\n", name, ue.msg)
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
	// after, when set, is given the response of a successful unary call before it is printed.
	after func(resp proto.Message) error
}

// send fills in the secrets, makes the calls in order and prints the responses. A failed
// call is printed on stderr, scrubbed, and returned as exitError with its gRPC code.
func (o *callOptions) send(cmd *cobra.Command, calls []outgoing) error {
	ep, err := o.target()
	if err != nil {
		return err
	}
	if o.output != outputJSON && o.output != outputID {
		return usagef("--output %q: want json or id", o.output)
	}
	if o.output == outputID && (len(calls) != 1 || calls[0].method.desc.IsStreamingServer()) {
		return usagef("--output id: %s answers more than one message; use --output json", calls[0].method.name())
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
		if c.after != nil {
			if err := c.after(resp); err != nil {
				return err
			}
		}
		if c.key == "" && o.output == outputID {
			return p.id(c.method, resp)
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
