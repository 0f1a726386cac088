package orchestrators

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"sync"

	_ "github.com/container-storage-interface/spec/lib/go/csi" // registers the csi.v1 descriptors
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// witness sits between the gateway and the appliance, on the appliance's side of the last
// hop: it forwards every call's bytes unchanged and records, for each, the method and the
// values of the request's `secrets` field. The appliance keeps no record of the secrets it
// receives, so this is where the test sees that a StorageClass's secrets reached it. The
// values stay in this process's memory; nothing is logged.
type witness struct {
	backend *grpc.ClientConn
	srv     *grpc.Server

	mu    sync.Mutex
	calls []witnessed
}

type witnessed struct {
	method  string            // short name: CreateVolume
	secrets map[string]string // the request's secrets field, if it has one
}

// rawCodec passes frames through as bytes. Its name is "proto" so the content type on the
// wire stays application/grpc+proto both ways.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// startWitness listens on the Unix socket at path and forwards to target (unix:///...).
func startWitness(path, target string) (*witness, error) {
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	os.Remove(path)
	lis, err := net.Listen("unix", path)
	if err != nil {
		conn.Close()
		return nil, err
	}
	w := &witness{backend: conn}
	w.srv = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(w.handle))
	go w.srv.Serve(lis)
	return w, nil
}

func (w *witness) stop() {
	w.srv.Stop()
	w.backend.Close()
}

// handle forwards one call, unary or streaming, frame by frame.
func (w *witness) handle(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	md, _ := metadata.FromIncomingContext(ss.Context())
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ss.Context(), md.Copy()))
	defer cancel()
	cs, err := w.backend.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	go func() {
		for {
			var frame []byte
			if err := ss.RecvMsg(&frame); err != nil {
				cs.CloseSend()
				return
			}
			w.observe(method, frame)
			if err := cs.SendMsg(&frame); err != nil {
				return
			}
		}
	}()
	if h, err := cs.Header(); err == nil {
		ss.SendHeader(h)
	}
	for {
		var frame []byte
		err := cs.RecvMsg(&frame)
		if err == io.EOF {
			ss.SetTrailer(cs.Trailer())
			return nil
		}
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			return err
		}
		if err := ss.SendMsg(&frame); err != nil {
			return err
		}
	}
}

// observe decodes a request of a method it finds in the protobuf registry and records its
// secrets field.
func (w *witness) observe(method string, frame []byte) {
	svc, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	c := witnessed{method: name}
	if d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc)); err == nil {
		if sd, ok := d.(protoreflect.ServiceDescriptor); ok {
			if md := sd.Methods().ByName(protoreflect.Name(name)); md != nil {
				if mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName()); err == nil {
					msg := mt.New().Interface()
					if proto.Unmarshal(frame, msg) == nil {
						c.secrets = secretsOf(msg.ProtoReflect())
					}
				}
			}
		}
	}
	w.mu.Lock()
	w.calls = append(w.calls, c)
	w.mu.Unlock()
}

func secretsOf(m protoreflect.Message) map[string]string {
	f := m.Descriptor().Fields().ByName("secrets")
	if f == nil || !f.IsMap() {
		return nil
	}
	out := map[string]string{}
	m.Get(f).Map().Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		out[k.String()] = v.String()
		return true
	})
	return out
}

// mark is a point in the record: seenSince counts the calls after it.
func (w *witness) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.calls)
}

// seen reports how many calls of method reached the appliance, and how many of them carried
// a secret whose value is canary.
func (w *witness) seen(method, canary string) (calls, withCanary int) {
	return w.seenSince(0, method, canary)
}

// seenSince is seen for the calls after mark.
func (w *witness) seenSince(mark int, method, canary string) (calls, withCanary int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.calls[mark:] {
		if c.method != method {
			continue
		}
		calls++
		for _, v := range c.secrets {
			if v == canary {
				withCanary++
				break
			}
		}
	}
	return calls, withCanary
}

// methods lists the methods seen after mark, in order, repeats folded.
func (w *witness) methods(mark int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, c := range w.calls[mark:] {
		if len(out) == 0 || out[len(out)-1] != c.method {
			out = append(out, c.method)
		}
	}
	return out
}
