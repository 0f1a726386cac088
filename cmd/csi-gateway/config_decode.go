package main

import (
	"errors"
	"fmt"

	"github.com/go-viper/mapstructure/v2"
)

// keyedDecodeError is the error of a configuration viper could not decode into Config. When a
// typed value refused what was written (proxy.SocketMode), it is that value's error behind
// the key's path, "listeners[0].socketMode: …", like every other configuration error;
// mapstructure's own errors (unknown keys, a list where a map belongs) keep its wording.
func keyedDecodeError(err error) error {
	if de := valueDecodeError(err); de != nil {
		return fmt.Errorf("%s: %w", de.Name(), de.Unwrap())
	}
	return fmt.Errorf("configuration: %w", err)
}

// valueDecodeError returns the first error in err's tree that names a key and whose cause is
// not mapstructure's own: a typed value's UnmarshalMapstructure or UnmarshalText refusing.
func valueDecodeError(err error) *mapstructure.DecodeError {
	if de, ok := err.(*mapstructure.DecodeError); ok {
		var own mapstructure.Error
		if !errors.As(de.Unwrap(), &own) {
			return de
		}
	}
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range e.Unwrap() {
			if de := valueDecodeError(e); de != nil {
				return de
			}
		}
	case interface{ Unwrap() error }:
		return valueDecodeError(e.Unwrap())
	}
	return nil
}
