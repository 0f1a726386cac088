package connect

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

func TestRegistrarCollectsServices(t *testing.T) {
	var r Registrar
	f := &fake{}
	csi.RegisterIdentityServer(&r, f)
	csi.RegisterControllerServer(&r, f)
	got := r.Services()
	if len(got) != 2 || got[0].Desc != &csi.Identity_ServiceDesc || got[1].Desc != &csi.Controller_ServiceDesc ||
		got[0].Impl != f || got[1].Impl != f {
		t.Fatalf("Services() = %+v, want Identity then Controller, both with the fake", got)
	}
	got[0] = Service{}
	if r.Services()[0].Desc != &csi.Identity_ServiceDesc {
		t.Error("Services() returned the registrar's own slice, not a copy")
	}

	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/csi.v1.Identity/GetPluginInfo", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	NewHandler(r.Services()).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "embedded.csi-gateway.io") {
		t.Errorf("GetPluginInfo through the collected services: %d %s, want 200 with the plugin info", rec.Code, rec.Body)
	}
}
