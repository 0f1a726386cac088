package proxy

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
)

// tapRecords are calls of several methods, codes, volumes and backends for the filter tests.
var tapRecords = []CallRecord{
	tapRecord("/csi.v1.Controller/CreateVolume", codes.OK, map[string]string{"name": "pvc-1"}, "array1"),
	tapRecord("/csi.v1.Controller/CreateVolume", codes.AlreadyExists, map[string]string{"name": "pvc-2"}, "array2"),
	tapRecord("/csi.v1.Controller/ControllerGetVolume", codes.NotFound, map[string]string{"volume_id": "vol-9"}, "array1"),
	tapRecord("/csi.v1.Controller/CreateSnapshot", codes.OK, map[string]string{"name": "snap-1", "source_volume_id": "vol-1"}, "array1"),
	tapRecord("/csi.v1.Node/NodeStageVolume", codes.OK, map[string]string{"volume_id": "vol-1"}, "array2"),
	tapRecord("/csi.v1.Node/NodeGetInfo", codes.Unavailable, nil, "array2"),
	tapRecord("/csi.v1.Identity/Probe", codes.Canceled, nil, ""),
}

// tapRecord is the record of a call to full, short-named as the gateway names it.
func tapRecord(full string, code codes.Code, ids map[string]string, backend string) CallRecord {
	short := full[strings.LastIndex(full, "/")+1:]
	return CallRecord{Method: short, FullMethod: full, Code: code, CodeName: code.String(), IDs: ids, Backend: backend}
}

func TestTapFilterMatch(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  []int // indexes of tapRecords that pass
	}{
		{"", []int{0, 1, 2, 3, 4, 5, 6}},
		{"method=CreateVolume", []int{0, 1}},
		{"method=/csi.v1.Controller/CreateVolume", []int{0, 1}},
		{"method=csi.v1.Controller/CreateVolume", []int{0, 1}},
		{"method=Node*", []int{4, 5}},
		{"method=/csi.v1.Controller/*", []int{0, 1, 2, 3}},
		{"method=Create*&method=Probe", []int{0, 1, 3, 6}},
		{"method=createvolume", nil},
		{"method=Create", nil},
		{"code=NotFound", []int{2}},
		{"code=NOT_FOUND", []int{2}},
		{"code=5", []int{2}},
		{"code=CANCELLED", []int{6}},
		{"code=!OK", []int{1, 2, 5, 6}},
		{"code=!OK&code=!NotFound", []int{1, 5, 6}},
		{"code=NotFound&code=Unavailable", []int{2, 5}},
		{"volume=vol-1", []int{3, 4}},
		{"volume=vol-9&volume=vol-1", []int{2, 3, 4}},
		{"volume=pvc-1", nil}, // a name is not a volume ID
		{"backend=array2", []int{1, 4, 5}},
		{"backend=array1&code=!OK&method=Controller*", []int{2}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parseTapFilter(q)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for i := range tapRecords {
				if f.match(&tapRecords[i]) {
					got = append(got, i)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("records %v pass, want %v", got, tc.want)
			}
		})
	}
}

func TestTapFilterErrors(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{"vol=1", `tap: unknown filter "vol"; the filters are method, code, volume and backend`},
		{"method=X&zzz=1&aaa=2", `tap: unknown filter "aaa"; the filters are method, code, volume and backend`},
		{"method=", `tap: filter "method" is empty`},
		{"code=Missing", `tap: code "Missing" is not a gRPC code such as NotFound, or one excluded such as !OK`},
		{"code=17", `tap: code "17" is not a gRPC code such as NotFound, or one excluded such as !OK`},
		{"code=!", `tap: code "!" is not a gRPC code such as NotFound, or one excluded such as !OK`},
		{"method=Node[", `tap: method "Node[": bad glob pattern`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			_, err = parseTapFilter(q)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %s", err, tc.want)
			}
		})
	}
}
