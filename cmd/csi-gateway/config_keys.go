package main

import (
	"encoding"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"go.yaml.in/yaml/v3"
)

// checkKeys reports every key of a YAML configuration file that Config has no field for, at
// any depth and in file order, with its path and the nearest known key: "backendz: unknown
// key (did you mean backends?)". A key whose value is empty ({} or nothing) is refused like
// any other, which viper alone cannot do (it drops empty maps before decoding). Keys are
// compared without case, as viper does.
func checkKeys(data []byte, errs *configErrors) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return err
	}
	if len(doc.Content) == 0 {
		return nil // an empty file
	}
	walkKeys(doc.Content[0], reflect.TypeFor[Config](), "", errs)
	return nil
}

var (
	textUnmarshaler  = reflect.TypeFor[encoding.TextUnmarshaler]()
	mapstructureType = reflect.TypeFor[mapstructure.Unmarshaler]()
	durationType     = reflect.TypeFor[time.Duration]()
)

// walkKeys checks node against t; path is node's key path ("" at the top).
func walkKeys(node *yaml.Node, t reflect.Type, path string, errs *configErrors) {
	for node.Kind == yaml.AliasNode {
		node = node.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == durationType || reflect.PointerTo(t).Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(mapstructureType) {
		return // a value decoded whole
	}
	switch t.Kind() {
	case reflect.Struct:
		if node.Kind != yaml.MappingNode {
			return // the decoder says what is wrong with it
		}
		fields := structKeys(t)
		for i := 0; i+1 < len(node.Content); i += 2 {
			key := node.Content[i].Value
			if key == "<<" { // a YAML merge: its keys are this mapping's
				walkKeys(node.Content[i+1], t, path, errs)
				continue
			}
			f, ok := fields[strings.ToLower(key)]
			if !ok {
				errs.addf(joinKey(path, key), "unknown key%s", suggestion(key, fields))
				continue
			}
			walkKeys(node.Content[i+1], f.typ, joinKey(path, key), errs)
		}
	case reflect.Map:
		if node.Kind != yaml.MappingNode {
			return
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			walkKeys(node.Content[i+1], t.Elem(), joinKey(path, node.Content[i].Value), errs)
		}
	case reflect.Slice:
		if node.Kind != yaml.SequenceNode {
			return
		}
		for i, item := range node.Content {
			walkKeys(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i), errs)
		}
	}
}

// structKey is one key of a struct: its name as documented and the type of its value.
type structKey struct {
	name string
	typ  reflect.Type
}

// structKeys returns the keys of struct t by their lower-case name; a ",squash" field's keys
// are t's own.
func structKeys(t reflect.Type) map[string]structKey {
	keys := map[string]structKey{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if name == "-" {
			continue
		}
		if opts == "squash" {
			for k, v := range structKeys(f.Type) {
				keys[k] = v
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		keys[strings.ToLower(name)] = structKey{name, f.Type}
	}
	return keys
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggestion returns " (did you mean K?)" for the known key K nearest to key, when it is
// close enough to be a typo (at most a third of its letters differ), else "".
func suggestion(key string, known map[string]structKey) string {
	best, bestDist := "", len(key)/3+1
	for lower, k := range known {
		if d := editDistance(strings.ToLower(key), lower); d < bestDist || (d == bestDist && k.name < best) {
			best, bestDist = k.name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}
