package main

import (
	"encoding"
	"fmt"
	"reflect"
	"regexp"

	"github.com/go-viper/mapstructure/v2"
)

// addDecodeErrors records each value viper could not decode into Config behind its key's
// path, "listeners[0].socketMode: …", like every other configuration error: a typed value's
// own refusal (proxy.SocketMode, a transport, a duration) or mapstructure's (a list where a
// map belongs).
func addDecodeErrors(err error, errs *configErrors) {
	switch e := err.(type) {
	case nil:
	case *mapstructure.DecodeError:
		errs.addf(mapKeys.ReplaceAllString(e.Name(), ".$1"), "%v", e.Unwrap())
	case interface{ Unwrap() []error }:
		for _, one := range e.Unwrap() {
			addDecodeErrors(one, errs)
		}
	case interface{ Unwrap() error }: // viper's "decoding failed due to the following error(s)"
		addDecodeErrors(e.Unwrap(), errs)
	default:
		errs.add(fmt.Errorf("configuration: %w", err))
	}
}

// mapKeys matches the "[name]" mapstructure writes for a map's key in a path
// ("backends[a].tls"), where the configuration's keys say "backends.a.tls"; a list's "[0]"
// stays.
var mapKeys = regexp.MustCompile(`\[([^\]]*[^0-9\]][^\]]*)\]`)

// textHook decodes a string into a value that implements encoding.TextUnmarshaler (a
// transport, a validation mode, a TLS version), so that each is parsed once, as it is
// decoded. A type that decodes itself (mapstructure.Unmarshaler: proxy.SocketMode, which
// refuses bare numbers) is left to do so.
func textHook(from, to reflect.Type, data any) (any, error) {
	s, ok := data.(string)
	if !ok || from.Kind() != reflect.String {
		return data, nil
	}
	p := reflect.New(to)
	if _, self := p.Interface().(mapstructure.Unmarshaler); self {
		return data, nil
	}
	u, ok := p.Interface().(encoding.TextUnmarshaler)
	if !ok {
		return data, nil
	}
	if err := u.UnmarshalText([]byte(s)); err != nil {
		return nil, err
	}
	return p.Elem().Interface(), nil
}
