package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"

	"github.com/csi-gateway/csi-gateway/backends/rest/connect"
)

// The misbehaving backends of misbehaving_test.go: one state (misbehaver) answers both as a
// gRPC driver (driverAnswer, a driverFunc for startTestDriver) and as an HTTP appliance
// speaking Connect JSON (ServeHTTP), so that each row breaks the same rule on both transports.

// misbehaviour is how the driver and the appliance answer the row's call.
type misbehaviour struct {
	resp    proto.Message // answer OK with this message
	raw     string        // answer OK with these bytes (gRPC) or this JSON body (HTTP)
	code    codes.Code    // fail with this code (when not OK) ...
	msg     string        // ... and this message
	details bool          // attach google.rpc details to the failure
	reset   bool          // HTTP only: close the connection without an answer
	html    int           // HTTP only: answer this status with an HTML page (a load balancer's)
	caps    func(*misbehavingCaps)
}

// misbehavingCaps are the capability sets the driver and the appliance advertise.
type misbehavingCaps struct {
	plugin     []csi.PluginCapability_Service_Type
	controller []csi.ControllerServiceCapability_RPC_Type
	node       []csi.NodeServiceCapability_RPC_Type
}

func misbehavingFullCaps() *misbehavingCaps {
	c := &misbehavingCaps{}
	for v := range csi.PluginCapability_Service_Type_name {
		if v != 0 {
			c.plugin = append(c.plugin, csi.PluginCapability_Service_Type(v))
		}
	}
	for v := range csi.ControllerServiceCapability_RPC_Type_name {
		if v != 0 {
			c.controller = append(c.controller, csi.ControllerServiceCapability_RPC_Type(v))
		}
	}
	for v := range csi.NodeServiceCapability_RPC_Type_name {
		if v != 0 {
			c.node = append(c.node, csi.NodeServiceCapability_RPC_Type(v))
		}
	}
	return c
}

func (c *misbehavingCaps) dropPlugin(t csi.PluginCapability_Service_Type) {
	c.plugin = dropCapability(c.plugin, t)
}

func (c *misbehavingCaps) dropController(t csi.ControllerServiceCapability_RPC_Type) {
	c.controller = dropCapability(c.controller, t)
}

func dropCapability[T comparable](s []T, drop T) []T {
	var out []T
	for _, v := range s {
		if v != drop {
			out = append(out, v)
		}
	}
	return out
}

// answer returns the capability answer for method, or nil when method is no capability RPC.
func (c *misbehavingCaps) answer(method string) proto.Message {
	switch method {
	case "/csi.v1.Identity/GetPluginCapabilities":
		r := &csi.GetPluginCapabilitiesResponse{}
		for _, t := range c.plugin {
			r.Capabilities = append(r.Capabilities, &csi.PluginCapability{Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: t}}})
		}
		return r
	case "/csi.v1.Controller/ControllerGetCapabilities":
		r := &csi.ControllerGetCapabilitiesResponse{}
		for _, t := range c.controller {
			r.Capabilities = append(r.Capabilities, &csi.ControllerServiceCapability{Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: t}}})
		}
		return r
	case "/csi.v1.Node/NodeGetCapabilities":
		r := &csi.NodeGetCapabilitiesResponse{}
		for _, t := range c.node {
			r.Capabilities = append(r.Capabilities, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
		}
		return r
	}
	return nil
}

// misbehaver holds the current row's misbehaviour for the driver and the appliance, and
// records the non-capability methods they were called with.
type misbehaver struct {
	mu     sync.Mutex
	now    misbehaviour
	caps   *misbehavingCaps
	called []string
}

func (m *misbehaver) set(b misbehaviour) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now, m.called, m.caps = b, nil, misbehavingFullCaps()
	if b.caps != nil {
		b.caps(m.caps)
	}
}

// take returns what to answer method with: the capability answer, or the misbehaviour (and
// records the call).
func (m *misbehaver) take(method string) (proto.Message, misbehaviour) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.caps.answer(method); c != nil {
		return c, misbehaviour{}
	}
	m.called = append(m.called, method)
	return nil, m.now
}

func (m *misbehaver) calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.called...)
}

// misbehavingDetails are the details a misbehaving backend attaches to its failures.
func misbehavingDetails() []protoadapt.MessageV1 {
	return []protoadapt.MessageV1{
		&errdetails.ErrorInfo{Reason: "DRIVER_REFUSED", Domain: "driver.example"},
		&errdetails.DebugInfo{Detail: "stack trace: main.go:42"},
	}
}

// driverAnswer is the test driver's driverFunc for the misbehaver.
func (m *misbehaver) driverAnswer(_ context.Context, c *driverCall, send func([]byte) error) error {
	caps, b := m.take(c.Method)
	switch {
	case caps != nil:
		return send(marshal(caps))
	case b.resp != nil:
		return send(marshal(b.resp))
	case b.raw != "":
		return send([]byte(b.raw))
	case b.code != codes.OK:
		st := status.New(b.code, b.msg)
		if b.details {
			var err error
			if st, err = st.WithDetails(misbehavingDetails()...); err != nil {
				return err
			}
		}
		return st.Err()
	}
	return nil // an empty answer
}

// ServeHTTP is the misbehaving appliance: the Connect JSON protocol of docs/rest-protocol.md,
// POST /{service}/{method}.
func (m *misbehaver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	caps, b := m.take(r.URL.Path)
	writeJSON := func(status int, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
	switch {
	case caps != nil:
		body, _ := protojson.Marshal(caps)
		writeJSON(http.StatusOK, body)
	case b.resp != nil:
		body, _ := protojson.Marshal(b.resp)
		writeJSON(http.StatusOK, body)
	case b.raw != "":
		writeJSON(http.StatusOK, []byte(b.raw))
	case b.reset:
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	case b.html != 0:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(b.html)
		fmt.Fprintf(w, "<html><head><title>%d %s</title></head><body>nginx</body></html>", b.html, http.StatusText(b.html))
	case b.code != codes.OK:
		e := map[string]any{"code": connect.CodeName(b.code), "message": b.msg}
		if b.details {
			var ds []map[string]string
			for _, d1 := range misbehavingDetails() {
				d := protoadapt.MessageV2Of(d1)
				v, _ := proto.Marshal(d)
				ds = append(ds, map[string]string{"type": string(d.ProtoReflect().Descriptor().FullName()), "value": base64.RawStdEncoding.EncodeToString(v)})
			}
			e["details"] = ds
		}
		body, _ := json.Marshal(e)
		writeJSON(connect.HTTPStatus(b.code), body)
	default:
		writeJSON(http.StatusOK, []byte("{}"))
	}
}
