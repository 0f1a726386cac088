package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestListenerWarnsSocketName: a Unix listener whose socket does not end in .sock is served
// (the policy is built) with a warning naming the key and the path; one that does is not
// warned about.
func TestListenerWarnsSocketName(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		warn     string
	}{
		{"unix:///run/csi/csi-endpoint", "listeners[0]: the socket /run/csi/csi-endpoint does not end in .sock, as CSI requires of every UNIX endpoint; " +
			"serving it anyway: rename it where it is set (CSI_ENDPOINT, --endpoint or listeners[0].endpoint) and in what connects to it"},
		{"unix:///run/csi/csi.socket", "the socket /run/csi/csi.socket does not end in .sock"},
		{"unix:///run/csi/csi.sock", ""},
	} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, nil))
		var lc ListenerConfig
		if err := lc.Endpoint.UnmarshalText([]byte(tc.endpoint)); err != nil {
			t.Fatal(err)
		}
		if _, ts, err := listenerPolicy("listeners[0]", lc, nil, log); err != nil || ts != nil {
			t.Fatalf("%s: %v, %v", tc.endpoint, ts, err)
		}
		switch out := buf.String(); {
		case tc.warn == "" && out != "":
			t.Errorf("%s: logged %q", tc.endpoint, out)
		case tc.warn != "" && (!strings.Contains(out, "level=WARN") || !strings.Contains(out, tc.warn)):
			t.Errorf("%s: logged %q, want a warning %q", tc.endpoint, out, tc.warn)
		}
	}
}
