package main

import (
	"bytes"
	"cmp"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	// The services `call` knows, registered in the protobuf registry.
	_ "github.com/container-storage-interface/spec/lib/go/csi"
	_ "github.com/csi-addons/spec/lib/go/volumegroup"
)

// method is a method resolved through the protobuf registry.
type method struct {
	full string // "/csi.v1.Controller/CreateVolume", as gRPC names it
	desc protoreflect.MethodDescriptor
}

func (m method) name() string { return string(m.desc.Name()) }

// newMessage returns an empty message of type d: the registered Go type, or a dynamic one.
func (method) newMessage(d protoreflect.MessageDescriptor) proto.Message {
	if mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName()); err == nil {
		return mt.New().Interface()
	}
	return dynamicpb.NewMessage(d)
}

// parseRequest decodes a JSON request; blank text is an empty request.
func (m method) parseRequest(text []byte) (proto.Message, error) {
	req := m.newMessage(m.desc.Input())
	if len(bytes.TrimSpace(text)) == 0 {
		return req, nil
	}
	if err := protojson.Unmarshal(text, req); err != nil {
		return nil, usagef("request for %s is not a valid %s in JSON: %s", m.name(), m.desc.Input().FullName(),
			strings.TrimLeft(strings.TrimPrefix(err.Error(), "proto:"), " \u00a0")) // protojson varies that space
	}
	return req, nil
}

// callPackages are the proto packages `call` knows, in the order a bare service name is
// looked up in them.
var callPackages = []string{"csi.v1", "volumegroup"}

// resolveMethod finds Service/Method in the registry. The package is optional, and so is a
// leading slash. An unknown method is a usage error that names close matches.
func resolveMethod(s string) (method, error) {
	service, name, ok := strings.Cut(strings.TrimPrefix(s, "/"), "/")
	if !ok || service == "" || name == "" || strings.Contains(name, "/") {
		return method{}, usagef("method %q: want <Service>/<Method>, e.g. Controller/CreateVolume", s)
	}
	services := []string{service}
	if !strings.Contains(service, ".") {
		services = nil
		for _, p := range callPackages {
			services = append(services, p+"."+service)
		}
	}
	for _, sv := range services {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(sv))
		if err != nil {
			continue
		}
		if sd, ok := d.(protoreflect.ServiceDescriptor); ok {
			if md := sd.Methods().ByName(protoreflect.Name(name)); md != nil {
				return method{full: "/" + sv + "/" + name, desc: md}, nil
			}
		}
	}
	if near := closeMatches(service, name); len(near) > 0 {
		return method{}, usagef("unknown method %q; did you mean %s?", s, strings.Join(near, " or "))
	}
	return method{}, usagef("unknown method %q; the services are %s", s, strings.Join(knownServices(), ", "))
}

// knownMethods lists Service/Method for every method of callPackages, sorted.
func knownMethods() []string {
	var out []string
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if !slices.Contains(callPackages, string(fd.Package())) {
			return true
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				out = append(out, string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name()))
			}
		}
		return true
	})
	slices.Sort(out)
	return out
}

func knownServices() []string {
	var out []string
	for _, m := range knownMethods() {
		s, _, _ := strings.Cut(m, "/")
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// closeMatches returns up to five known methods that look like service/name: a name a few
// edits away or containing it, preferably in a service of the same name.
func closeMatches(service, name string) []string {
	type match struct {
		m string
		d int
	}
	var found []match
	want := strings.ToLower(name)
	wantService := "." + strings.ToLower(service[strings.LastIndex(service, ".")+1:])
	for _, m := range knownMethods() {
		sv, n, _ := strings.Cut(strings.ToLower(m), "/")
		d := editDistance(want, n)
		if len(want) >= 4 && strings.Contains(n, want) {
			d = min(d, 1)
		}
		if !strings.HasSuffix(sv, wantService) {
			d++
		}
		if d <= max(2, len(want)/4) {
			found = append(found, match{m, d})
		}
	}
	slices.SortFunc(found, func(a, b match) int { return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.m, b.m)) })
	var out []string
	for _, f := range found[:min(len(found), 5)] {
		out = append(out, f.m)
	}
	return out
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
