package proxy

import (
	"context"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/csi-gateway/csi-gateway/backends"
)

// FuzzValidateRequest decodes arbitrary bytes into the request of a method the selector
// picks (and into its response), and checks that validation never panics and is
// deterministic: the same message gives the same violations, in the same order, every time.
// The checker must also find the same whether it reads a message's Go struct or reads it
// through protoreflect alone (see sameThroughReflect). The second selector byte picks which
// capabilities the backend advertises.
func FuzzValidateRequest(f *testing.F) {
	methods := slices.Sorted(maps.Keys(newMethodTable()))
	index := func(method string) uint8 { return uint8(slices.Index(methods, method)) }
	for method, req := range validRequests {
		f.Add(index(method), uint8(0), mustMarshal(f, req))
	}
	for _, tc := range requestRuleCases() {
		f.Add(index(tc.method), uint8(1), mustMarshal(f, tc.req))
	}
	for _, tc := range responseRuleCases() {
		f.Add(index(tc.method), uint8(2), mustMarshal(f, tc.resp))
	}
	f.Add(uint8(0), uint8(3), []byte{0x0a, 0x7f})

	full := valAllCaps()
	drops := []capRef{
		ctrlCap(csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME),
		ctrlCap(csi.ControllerServiceCapability_RPC_PUBLISH_READONLY),
		ctrlCap(csi.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES),
		nodeCap(csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME),
		pluginCap(csi.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS),
		ctrlCap(csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER),
		ctrlCap(csi.ControllerServiceCapability_RPC_CLONE_VOLUME),
		{groupCaps, int32(csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT)},
	}
	validators := make([]*validator, 256)
	for i := range validators {
		var drop []capRef
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
		sameThroughReflect(t, method, req)
		first := v.checkRequest(ctx, method, "fake", req)
		for range 2 {
			if again := v.checkRequest(ctx, method, "fake", req); !slices.Equal(first, again) {
				t.Fatalf("%s: violations differ between runs:\n%v\n%v", method, first, again)
			}
		}
		for _, vl := range first {
			if vl.msg == "" || vl.code == 0 {
				t.Fatalf("%s: empty violation %+v", method, vl)
			}
		}

		resp := info.output.New().Interface()
		if proto.Unmarshal(data, resp) != nil {
			return
		}
		sameThroughReflect(t, method, resp)
		out := v.checkResponse(ctx, method, "fake", req, resp)
		if again := v.checkResponse(ctx, method, "fake", req, resp); !slices.Equal(out, again) {
			t.Fatalf("%s: answer violations differ between runs:\n%v\n%v", method, out, again)
		}
		if len(first) > maxViolations || len(out) > maxViolations {
			t.Fatalf("%s: more than %d violations", method, maxViolations)
		}
	})
}

// sameThroughReflect fails unless the checker finds the same violations in m whether it reads
// the fields goStruct knows from m's Go struct (as it does) or every field through
// protoreflect (with plans whose goStructs know no field).
func sameThroughReflect(t *testing.T, method string, m proto.Message) {
	t.Helper()
	md := m.ProtoReflect().Descriptor()
	p, ok := reflectOnlyPlans.Load(md)
	if !ok {
		plans := map[protoreflect.MessageDescriptor]*rulePlan{}
		root := compileRules(md, plans)
		for _, q := range plans {
			q.goMaps = goStruct{}
		}
		p, _ = reflectOnlyPlans.LoadOrStore(md, root)
	}
	for _, sd := range []side{requestSide, responseSide} {
		viaStruct, viaReflect := newChecker(sd), newChecker(sd)
		viaStruct.check(m.ProtoReflect())
		viaReflect.message(m.ProtoReflect(), reflect.Value{}, p.(*rulePlan))
		if !slices.Equal(viaStruct.out, viaReflect.out) {
			t.Fatalf("%s: the checker found\n%v\nreading Go structs, and\n%v\nthrough protoreflect", method, viaStruct.out, viaReflect.out)
		}
	}
}

// reflectOnlyPlans are sameThroughReflect's plans, by message descriptor.
var reflectOnlyPlans sync.Map
