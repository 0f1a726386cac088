package main

import (
	"errors"
	"fmt"
)

// configErrors collects every problem Validate finds in a configuration, each behind the path
// of its key ("backends.array1.tls.ca: ..."), in the order the checks walk the configuration:
// unknown keys first, in file order, then each section in the order of Config's fields, lists
// by index and maps by sorted name, so that the same file always reports the same lines.
type configErrors struct{ errs []error }

// add records err (nil: nothing), which already names its key.
func (e *configErrors) add(err error) {
	if err != nil {
		e.errs = append(e.errs, err)
	}
}

// addf records a problem of key.
func (e *configErrors) addf(key, format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
}

// addEach records each of the joined errors in err, prefix before each ("backends.a.").
func (e *configErrors) addEach(prefix string, err error) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, one := range j.Unwrap() {
			e.addEach(prefix, one)
		}
		return
	}
	e.errs = append(e.errs, fmt.Errorf("%s%w", prefix, err))
}

// err returns the problems found, one per line, or nil.
func (e *configErrors) err() error { return errors.Join(e.errs...) }
