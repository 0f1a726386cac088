package proxy

import (
	"fmt"
	"os"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// DescriptorSet is a set of services the gateway does not compile in, known from a protobuf
// descriptor set (`protoc --include_imports --descriptor_set_out`) an operator hands it: their
// methods are decoded (as dynamic messages), logged with their secrets redacted, and their
// errors, log lines, spans and tap records scrubbed of the call's secret values, like the
// compiled-in ones. A field is secret when it carries the csi_secret option (the csi-addons
// protos mark theirs) or when SecretFields names it: the same list that names CSI v0's secrets,
// which carry no option either (redact.WithSecretFields). What such a service's RPCs mean is
// not the CSI spec's: they are not validated, their statuses keep their codes (only scrubbed),
// and tenant listeners refuse them.
type DescriptorSet struct {
	// Source names the set in messages (its file).
	Source string
	// SecretFields are fields secret although no option marks them, by full name.
	SecretFields []protoreflect.FullName

	files *protoregistry.Files
}

// LoadDescriptorSet reads a serialized google.protobuf.FileDescriptorSet from path and checks
// that each of secretFields names a field in it. Files the set imports but leaves out
// (built without --include_imports) are looked up among the compiled-in ones.
func LoadDescriptorSet(path string, secretFields []string) (*DescriptorSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("%s is not a protobuf descriptor set (protoc --descriptor_set_out): %v", path, err)
	}
	return NewDescriptorSet(path, &set, secretFields)
}

// NewDescriptorSet is LoadDescriptorSet for a set already read; source names it in messages.
func NewDescriptorSet(source string, set *descriptorpb.FileDescriptorSet, secretFields []string) (*DescriptorSet, error) {
	files := &protoregistry.Files{}
	resolver := chainedFiles{files, protoregistry.GlobalFiles}
	for _, fdp := range set.GetFile() {
		if _, err := files.FindFileByPath(fdp.GetName()); err == nil {
			continue // listed twice
		}
		fd, err := protodesc.NewFile(fdp, resolver)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %v (build the set with protoc --include_imports)", source, fdp.GetName(), err)
		}
		if err := files.RegisterFile(fd); err != nil {
			return nil, fmt.Errorf("%s: %s: %v", source, fdp.GetName(), err)
		}
	}
	ds := &DescriptorSet{Source: source, files: files}
	for _, name := range secretFields {
		d, err := files.FindDescriptorByName(protoreflect.FullName(name))
		if _, isField := d.(protoreflect.FieldDescriptor); err != nil || !isField {
			return nil, fmt.Errorf("%s: secret field %q is not a field of the set (a full name: package.Message.field)", source, name)
		}
		ds.SecretFields = append(ds.SecretFields, protoreflect.FullName(name))
	}
	return ds, nil
}

// methods returns the methods of the set's services, by full method name: every service but
// those of the packages the gateway compiles in (a set built with --include_imports may carry
// csi.proto itself), which keep their compiled-in description.
func (ds *DescriptorSet) methods() methodTable {
	t := methodTable{}
	ds.files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			if hasPackage(knownPackages, string(sd.FullName())) {
				continue
			}
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				full := "/" + string(sd.FullName()) + "/" + string(md.Name())
				t[full] = &methodInfo{name: string(md.Name()), desc: md, input: dynamicpb.NewMessageType(md.Input()),
					output: dynamicpb.NewMessageType(md.Output()), idFields: idFieldsOf(md.Input()), paging: pageTokensOf(md),
					notCSI: true}
			}
		}
		return true
	})
	return t
}

// chainedFiles resolves a file or name in each registry in turn.
type chainedFiles []protodesc.Resolver

func (c chainedFiles) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	for _, r := range c {
		if fd, err := r.FindFileByPath(path); err == nil {
			return fd, nil
		}
	}
	return nil, protoregistry.NotFound
}

func (c chainedFiles) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	for _, r := range c {
		if d, err := r.FindDescriptorByName(name); err == nil {
			return d, nil
		}
	}
	return nil, protoregistry.NotFound
}
