package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// connectAppliance is an appliance written in the test: a real HTTP server on loopback
// (plain http://) that speaks the connect protocol (docs/rest-protocol.md). It decodes each
// request as the CSI message of its path, records it, and lets answer reply; Identity calls
// (the backend's readiness probes) get {} when answer leaves them.
type connectAppliance struct {
	*httptest.Server
	answer func(w http.ResponseWriter, path string, req proto.Message)

	mu       sync.Mutex
	requests map[string][]proto.Message // by path
}

func startConnectAppliance(t *testing.T, answer func(w http.ResponseWriter, path string, req proto.Message)) *connectAppliance {
	t.Helper()
	a := &connectAppliance{answer: answer, requests: map[string][]proto.Message{}}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

func (a *connectAppliance) serve(w http.ResponseWriter, r *http.Request) {
	md := methodDesc(r.URL.Path)
	if md == nil || r.Method != http.MethodPost {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":"unimplemented","message":"no such method"}`))
		return
	}
	body, _ := io.ReadAll(r.Body)
	req := newMessage(md.Input())
	if err := protojson.Unmarshal(body, req); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"code":"invalid_argument","message":"the body is not the request message"}`))
		return
	}
	a.mu.Lock()
	a.requests[r.URL.Path] = append(a.requests[r.URL.Path], req)
	a.mu.Unlock()
	if md.Parent().FullName() == "csi.v1.Identity" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
		return
	}
	a.answer(w, r.URL.Path, req)
}

// Requests returns the requests received at path (such as "/csi.v1.Controller/CreateVolume").
func (a *connectAppliance) Requests(path string) []proto.Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]proto.Message(nil), a.requests[path]...)
}
