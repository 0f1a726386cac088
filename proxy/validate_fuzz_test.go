package proxy

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/csispec"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// FuzzValidateRequest decodes arbitrary bytes into the request of a method the selector
// picks (and into its response), and checks that validation never panics and is
// deterministic: the same message gives the same violations, in the same order, every time.
// The second selector byte picks which capabilities the backend advertises. (csispec's
// FuzzCheck checks that the rule engine finds the same reading Go structs as through
// protoreflect alone.)
func FuzzValidateRequest(f *testing.F) {
	methods := slices.Sorted(maps.Keys(newMethodTable()))
	index := func(method string) uint8 { return uint8(slices.Index(methods, method)) }
	for method, req := range validRequests {
		f.Add(index(method), uint8(0), testutil.MustMarshal(f, req))
	}
	for _, tc := range requestRuleCases() {
		f.Add(index(tc.method), uint8(1), testutil.MustMarshal(f, tc.req))
	}
	for _, tc := range responseRuleCases() {
		f.Add(index(tc.method), uint8(2), testutil.MustMarshal(f, tc.resp))
	}
	f.Add(uint8(0), uint8(3), []byte{0x0a, 0x7f})

	full := valAllCaps()
	drops := []csispec.CapRef{
		csispec.ControllerCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
		csispec.ControllerCap(csi.ControllerServiceCapability_RPC_PUBLISH_READONLY),
		csispec.ControllerCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES),
		csispec.NodeCap(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME),
		csispec.PluginCap(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		csispec.ControllerCap(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER),
		csispec.ControllerCap(csi.ControllerServiceCapability_RPC_CLONE_VOLUME),
		csispec.GroupCap(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT),
	}
	validators := make([]*validator, 256)
	for i := range validators {
		var drop []csispec.CapRef
		for bit, ref := range drops {
			if i&(1<<bit) != 0 {
				drop = append(drop, ref)
			}
		}
		bes := map[string]backends.Backend{"fake": validationFake(full.without(drop...), nil)}
		validators[i] = &validator{mode: ValidationEnforce, routes: routeTable{{Methods: []string{"*"}, Backend: "fake"}},
			caps: newCapabilityCache(bes, slog.New(slog.DiscardHandler), time.Hour)}
	}

	f.Fuzz(func(t *testing.T, which, capBits uint8, data []byte) {
		method := methods[int(which)%len(methods)]
		info := lookupMethod(method)
		v := validators[capBits]
		ctx := context.Background()

		req := info.input.New().Interface()
		if proto.Unmarshal(data, req) != nil {
			return // the middleware refuses undecodable requests before any rule
		}
		first := v.checkRequest(ctx, method, "fake", req)
		for range 2 {
			if again := v.checkRequest(ctx, method, "fake", req); !slices.Equal(first, again) {
				t.Fatalf("%s: violations differ between runs:\n%v\n%v", method, first, again)
			}
		}
		for _, vl := range first {
			if vl.Msg == "" || vl.Code == 0 {
				t.Fatalf("%s: empty violation %+v", method, vl)
			}
		}

		resp := info.output.New().Interface()
		if proto.Unmarshal(data, resp) != nil {
			return
		}
		out := v.checkResponse(ctx, method, "fake", req, resp)
		if again := v.checkResponse(ctx, method, "fake", req, resp); !slices.Equal(out, again) {
			t.Fatalf("%s: answer violations differ between runs:\n%v\n%v", method, out, again)
		}
		if len(first) > csispec.MaxViolations || len(out) > csispec.MaxViolations {
			t.Fatalf("%s: more than %d violations", method, csispec.MaxViolations)
		}
	})
}
