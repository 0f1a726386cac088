package connect

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// FuzzHandlerBody checks that any body gets either the response or a well-formed
// invalid_argument answer, never a failure of the handler itself. CreateVolume is used
// because the fake always succeeds there and its request has every kind of field.
func FuzzHandlerBody(f *testing.F) {
	for _, s := range []string{"", "{}", `{"name":"n"}`, `{"name":`, `[]`, `{"secrets":{"a":"b"}}`, "\xff",
		`{"capacity_range":{"requiredBytes":"1"},"volumeCapabilities":[{"block":{}}]}`} {
		f.Add(s)
	}
	h := NewHandler([]Service{{Desc: &csi.Controller_ServiceDesc, Impl: &fake{}}})
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/csi.v1.Controller/CreateVolume", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK:
		case http.StatusBadRequest:
			if e := decodeError(t, rec.Body.Bytes()); e.Code != "invalid_argument" || e.Message == "" {
				t.Errorf("400 with %+v", e)
			}
		default:
			t.Errorf("status %d for body %q: %s", rec.Code, body, rec.Body)
		}
	})
}
