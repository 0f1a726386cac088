package proxy

import (
	"maps"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	// The services the gateway knows, registered in the protobuf registry: their methods are
	// decoded and logged; any other method is forwarded as raw frames.
	_ "github.com/container-storage-interface/spec/lib/go/csi"
	_ "github.com/csi-addons/spec/lib/go/volumegroup"

	// CSI v0 (v0.2 and v0.3 on one schema), generated in this repository.
	_ "github.com/csi-gateway/csi-gateway/internal/csiv0"
	"github.com/csi-gateway/csi-gateway/internal/protoread"
)

// methodInfo describes a method the gateway knows from the protobuf registry.
type methodInfo struct {
	// name is the short method name, e.g. "CreateVolume".
	name string
	desc protoreflect.MethodDescriptor
	// input and output are the Go message types of request and response.
	input, output protoreflect.MessageType
	// idFields are the request's fields of recordedIDFields (see idFieldsOf).
	idFields []protoreflect.FieldDescriptor
	// paging is how a paged List method's request and answer carry their tokens; nil for
	// every other method.
	paging *pageTokens
	// tenantScoped: the tenancy ledger knows the method's names and IDs (csi.v1, volumegroup);
	// a tenant's call of any other method is refused (scopeTenants).
	tenantScoped bool
	// notCSI: a method of a DescriptorSet, decoded, redacted and scrubbed, but not governed by
	// the CSI spec: not validated, and its statuses keep their codes (canonicalize).
	notCSI bool
}

// pageTokens are the token fields of a paged List method: the request's starting_token and
// the answer's next_token.
type pageTokens struct {
	starting, next protoreflect.FieldDescriptor
}

// pageTokensOf returns the token fields of md when it is a paged List method (a unary
// method whose request has a starting_token and whose answer has a next_token, both
// strings), nil otherwise.
func pageTokensOf(md protoreflect.MethodDescriptor) *pageTokens {
	starting := md.Input().Fields().ByName("starting_token")
	next := md.Output().Fields().ByName("next_token")
	if md.IsStreamingClient() || md.IsStreamingServer() || !protoread.IsSingularString(starting) || !protoread.IsSingularString(next) {
		return nil
	}
	return &pageTokens{starting: starting, next: next}
}

// streaming reports whether either side of the method streams.
func (m *methodInfo) streaming() bool {
	return m.desc.IsStreamingClient() || m.desc.IsStreamingServer()
}

// knownPackages are the proto packages whose methods the gateway decodes; tenantPackages
// those of them whose IDs a tenant listener scopes (see package tenancy). CSI v0 is decoded,
// validated, redacted and canonicalized like v1, but not scoped: a tenant's v0 call is
// refused (docs/tenancy.md).
var (
	knownPackages  = []string{"csi.v1.", "csi.v0.", "volumegroup."}
	tenantPackages = []string{"csi.v1.", "volumegroup."}
)

// lookupMethod returns what the registry knows of a full method name such as
// "/csi.v1.Controller/CreateVolume", or nil for a method of a service the gateway does not
// know (it is still forwarded, as raw frames).
func lookupMethod(fullMethod string) *methodInfo {
	service, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok || !hasPackage(knownPackages, service) {
		return nil
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(service))
	if err != nil {
		return nil
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil
	}
	md := sd.Methods().ByName(protoreflect.Name(method))
	if md == nil {
		return nil
	}
	in, err1 := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
	out, err2 := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err1 != nil || err2 != nil {
		return nil
	}
	return &methodInfo{name: method, desc: md, input: in, output: out, idFields: idFieldsOf(md.Input()),
		paging: pageTokensOf(md), tenantScoped: hasPackage(tenantPackages, service)}
}

// hasPackage reports whether service is in one of packages (prefixes such as "csi.v1.").
func hasPackage(packages []string, service string) bool {
	for _, p := range packages {
		if strings.HasPrefix(service, p) {
			return true
		}
	}
	return false
}

// methodTable caches lookupMethod for every method of the known services, built once.
type methodTable map[string]*methodInfo

// newMethodTable walks the registry for every method of the known packages, and adds the
// methods of sets.
func newMethodTable(sets ...*DescriptorSet) methodTable {
	t := methodTable{}
	for _, ds := range sets {
		maps.Copy(t, ds.methods())
	}
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		services := fd.Services()
		for i := range services.Len() {
			sd := services.Get(i)
			if !hasPackage(knownPackages, string(sd.FullName())) {
				continue
			}
			for j := range sd.Methods().Len() {
				full := "/" + string(sd.FullName()) + "/" + string(sd.Methods().Get(j).Name())
				if info := lookupMethod(full); info != nil {
					t[full] = info
				}
			}
		}
		return true
	})
	return t
}
