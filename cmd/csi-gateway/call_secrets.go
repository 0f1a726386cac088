package main

import (
	"errors"
	"os"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// fillSecrets puts the secrets of --secrets-file, if any, into every field of req that
// carries the csi_secret option, over any the JSON request set for the same keys. A request
// without such a field is a usage error.
func (o *callOptions) fillSecrets(m method, req proto.Message) error {
	if o.secretsFile == "" {
		return nil
	}
	secrets, err := loadSecrets(o.secretsFile, m.name())
	if err != nil {
		return err
	}
	r := req.ProtoReflect()
	fields := r.Descriptor().Fields()
	found := false
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !fd.IsMap() || fd.MapValue().Kind() != protoreflect.StringKind {
			continue
		}
		if secret, _ := proto.GetExtension(fd.Options(), csi.E_CsiSecret).(bool); !secret {
			continue
		}
		found = true
		mp := r.Mutable(fd).Map()
		for k, v := range secrets {
			mp.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString(v))
		}
	}
	if !found {
		return usagef("--secrets-file: %s takes no secrets (its request %s has no secrets field)", m.name(), m.desc.Input().FullName())
	}
	return nil
}

// loadSecrets reads a secrets file: a flat map of key: value, or csi-sanity's form with one
// section per method (CreateVolumeSecret: {key: value}), from which the method's is taken.
// Errors never quote the file's content.
func loadSecrets(path, methodName string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--secrets-file: %v", err)
	}
	var flat map[string]string
	err = yaml.Unmarshal(data, &flat)
	if err == nil {
		return flat, nil
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) { // a syntax error: it names a line, not a value
		return nil, usagef("--secrets-file %s: %v", path, err)
	}
	var sections map[string]map[string]string
	if err := yaml.Unmarshal(data, &sections); err != nil {
		// A type error would quote the offending value, which may be a secret.
		return nil, usagef("--secrets-file %s: want a map of key: value, or csi-sanity's sections of them (CreateVolumeSecret: {key: value})", path)
	}
	for _, name := range []string{methodName + "Secret", "Controller" + methodName + "Secret"} {
		if s, ok := sections[name]; ok {
			return s, nil
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range sections {
			if !yield(k) {
				return
			}
		}
	})
	return nil, usagef("--secrets-file %s: no %sSecret section (it has %s)", path, methodName, strings.Join(names, ", "))
}
