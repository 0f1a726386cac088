package connect

import (
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
)

// TestDocExamples runs every curl command of docs/rest-protocol.md against the handler and
// checks the status and error code against the answer the document shows after it.
func TestDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/rest-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{}
	srv := serve(t, f)
	blocks := regexp.MustCompile("(?s)```(\\w*)\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	urlRE := regexp.MustCompile(`http://127\.0\.0\.1:8080(/\S+)`)
	headerRE := regexp.MustCompile(`-H '([^':]+): ([^']*)'`)
	bodyRE := regexp.MustCompile(`(?s)-d '([^']*)'`)
	statusRE := regexp.MustCompile(`^HTTP/1\.1 (\d{3}) `)
	ran := 0
	for i, b := range blocks {
		if b[1] != "sh" || !strings.Contains(b[2], "curl ") {
			continue
		}
		ran++
		r := request{path: urlRE.FindStringSubmatch(b[2])[1], header: map[string]string{}}
		for _, h := range headerRE.FindAllStringSubmatch(b[2], -1) {
			r.header[h[1]] = h[2]
		}
		if m := bodyRE.FindStringSubmatch(b[2]); m != nil {
			r.body = m[1]
		}
		wantStatus, wantCode, answer := http.StatusOK, "", ""
		if i+1 < len(blocks) {
			answer = blocks[i+1][2]
		}
		if m := statusRE.FindStringSubmatch(answer); m != nil {
			wantStatus, _ = strconv.Atoi(m[1])
			_, jsonBody, _ := strings.Cut(answer, "\n\n")
			wantCode = decodeError(t, []byte(jsonBody)).Code
		}
		t.Run(r.path, func(t *testing.T) {
			resp, body := do(t, t.Context(), srv, r)
			if resp.StatusCode != wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, wantStatus, body)
			}
			if wantCode != "" {
				if e := decodeError(t, body); e.Code != wantCode {
					t.Errorf("code %q, want %q", e.Code, wantCode)
				}
			}
		})
	}
	if ran != 4 {
		t.Errorf("ran %d curl examples, want 4", ran)
	}
	want := &csi.CreateVolumeRequest{
		Name:          "pvc-8c1f6a3e",
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		}},
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !proto.Equal(f.created, want) {
		t.Errorf("CreateVolume example decoded to %v, want %v", f.created, want)
	}
}
