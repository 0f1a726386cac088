package translate

import (
	"strings"

	"github.com/csi-gateway/csi-gateway/internal/choice"
)

// Version is the CSI version a backend speaks (a grpc backend's csiVersion).
type Version string

const (
	// V1 is CSI v1 (proto package csi.v1): every REST and embedded backend, and a grpc
	// backend's default when it is configured so.
	V1 Version = "v1"
	// V0 is CSI v0.2 or v0.3 (proto package csi.v0).
	V0 Version = "v0"
	// Auto is a grpc driver whose version the gateway finds out (see Backend): the default
	// of grpc backends.
	Auto Version = "auto"
	// untranslated is what Auto detects for a driver that implements neither version's
	// Identity: with nothing to tell its version, every call passes to it untouched.
	untranslated Version = "untranslated"
)

// ParseVersion reads a csiVersion as written in the configuration; "" is Auto.
func ParseVersion(s string) (Version, error) {
	return choice.Parse(s, "CSI version", Auto, V1, V0, Auto)
}

// UnmarshalText reads a csiVersion as the configuration decodes it (ParseVersion).
func (v *Version) UnmarshalText(text []byte) error { return choice.Set(v, text, ParseVersion) }

// The proto packages of the two versions' services, as full method names start.
const (
	v1Prefix = "/csi.v1."
	v0Prefix = "/csi.v0."
)

// callerVersion is the CSI version a full method name belongs to, "" for a method of any
// other service.
func callerVersion(method string) Version {
	switch {
	case strings.HasPrefix(method, v1Prefix):
		return V1
	case strings.HasPrefix(method, v0Prefix):
		return V0
	}
	return ""
}
