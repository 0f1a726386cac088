package csp

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/internal/shortname"
)

// Parameter keys the backend reads itself rather than passing to the CSP's config.
const (
	paramDescription    = "description"
	paramAccessProtocol = "accessProtocol"
)

// volumeConfig returns the CSP config of a new volume from CreateVolume's parameters: all of
// them but the orchestrator's own (csi.storage.k8s.io/…), the gateway's (csi-gateway.io/…)
// and the description, which is a field of its own.
func volumeConfig(params map[string]string) (config map[string]any, description string) {
	for k, v := range params {
		switch {
		case k == paramDescription:
			description = v
		case strings.HasPrefix(k, "csi.storage.k8s.io/"), strings.HasPrefix(k, "csi-gateway.io/"):
		default:
			if config == nil {
				config = map[string]any{}
			}
			config[k] = v
		}
	}
	return config, description
}

// cspName is the name an object the orchestrator names name has on the CSP: the same, unless
// the CSP limits names (truenas-csp); then a stable short form of it (internal/shortname), so
// that lookups by name still find what a create made.
func (b *Backend) cspName(name string) string {
	if b.profile.nameLimit == 0 {
		return name
	}
	return shortname.Fit(name, b.profile.nameLimit, b.profile.nameChar)
}

// checkMutable refuses mutable parameters the CSP cannot change (INVALID_ARGUMENT), before
// anything is created or sent: what a CSP would refuse only after the volume exists.
func (b *Backend) checkMutable(rpc string, params map[string]string) error {
	for k := range params {
		if !slices.Contains(b.cfg.MutableParameters, k) {
			return b.errorf(backends.ClassInvalid, rpc, "mutable parameter %q cannot be changed on this CSP (it can change %s; see backends.%s.csp.mutableParameters)",
				k, strings.Join(b.cfg.MutableParameters, ", "), b.name)
		}
	}
	return nil
}

// volumeContext returns the CSP's config of a volume as CSI volume_context (strings; other
// JSON values in their JSON form), so that it reaches the node side.
func volumeContext(config map[string]any) map[string]string {
	if len(config) == 0 {
		return nil
	}
	ctx := make(map[string]string, len(config))
	for k, v := range config {
		if s, ok := v.(string); ok {
			ctx[k] = s
			continue
		}
		j, _ := json.Marshal(v)
		ctx[k] = string(j)
	}
	return ctx
}

// checkCapabilities reports the first capability a CSP volume cannot offer: block and
// mount access are both fine (the node side formats), every access mode but the
// single-node multi-writer ones, which need a capability a CSP does not have.
func checkCapabilities(caps []*csi.VolumeCapability) error {
	for i, c := range caps {
		if c.GetBlock() == nil && c.GetMount() == nil {
			return fmt.Errorf("volume_capabilities[%d]: neither block nor mount", i)
		}
		switch c.GetAccessMode().GetMode() {
		case csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY,
			csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY, csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER,
			csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:
		default:
			return fmt.Errorf("volume_capabilities[%d]: access mode %s is not supported by a CSP volume", i, c.GetAccessMode().GetMode())
		}
	}
	return nil
}

// sizeFor returns the size to create for a capacity range: required_bytes, or the default
// when the range asks for none (bounded by limit_bytes).
func (b *Backend) sizeFor(rpc string, r *csi.CapacityRange) (int64, error) {
	required, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	if required < 0 || limit < 0 || (limit > 0 && required > limit) {
		return 0, b.errorf(backends.ClassOutOfRange, rpc, "capacity_range [%d, %d] cannot be served", required, limit)
	}
	if required > 0 {
		return required, nil
	}
	if limit > 0 {
		return min(DefaultVolumeSize, limit), nil
	}
	return DefaultVolumeSize, nil
}

// fits reports whether size is within a capacity range.
func fits(size int64, r *csi.CapacityRange) bool {
	return size >= r.GetRequiredBytes() && (r.GetLimitBytes() == 0 || size <= r.GetLimitBytes())
}

// unixTime is a CSP time in seconds since the epoch.
func unixTime(secs int64) time.Time { return time.Unix(secs, 0) }
