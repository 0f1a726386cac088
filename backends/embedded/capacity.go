package embedded

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sizeFor turns a capacity range into the size to allocate: required_bytes rounded up to
// whole MiB (or the default size when nothing is required), never above limit_bytes nor the
// appliance's maximum.
func (a *Appliance) sizeFor(r *csi.CapacityRange) (int64, error) {
	required, limit := r.GetRequiredBytes(), r.GetLimitBytes()
	switch {
	case required < 0 || limit < 0:
		return 0, invalid("capacity_range: required_bytes (%d) and limit_bytes (%d) must not be negative", required, limit)
	case limit > 0 && required > limit:
		return 0, invalid("capacity_range: required_bytes (%d) exceeds limit_bytes (%d)", required, limit)
	}
	size := required
	if size == 0 {
		size = a.cfg.DefaultVolumeBytes
		if limit > 0 && limit < size {
			size = limit
		}
	}
	size = roundUp(size, allocationUnit)
	if limit > 0 && size > limit {
		size = limit // still >= required, checked above
	}
	if size > a.cfg.MaxVolumeBytes {
		return 0, status.Errorf(codes.OutOfRange, "capacity_range asks for %d bytes; a volume of this appliance holds at most %d", size, a.cfg.MaxVolumeBytes)
	}
	return size, nil
}

// fits reports whether size bytes satisfy r.
func fits(size int64, r *csi.CapacityRange) bool {
	return size >= r.GetRequiredBytes() && (r.GetLimitBytes() == 0 || size <= r.GetLimitBytes())
}

// checkPoolRoom fails with RESOURCE_EXHAUSTED when growing the provisioned total by extra
// bytes would pass the appliance's capacity.
func (a *Appliance) checkPoolRoom(s *state, extra int64) error {
	if free := a.cfg.CapacityBytes - s.usedBytes(); extra > free {
		return status.Errorf(codes.ResourceExhausted, "the appliance has %d bytes left of %d; %d more were asked for: delete volumes or raise its capacity", free, a.cfg.CapacityBytes, extra)
	}
	return nil
}

func roundUp(n, unit int64) int64 {
	return (n + unit - 1) / unit * unit
}
