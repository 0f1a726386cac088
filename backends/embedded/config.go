package embedded

import (
	"cmp"
	"fmt"
	"path/filepath"
)

// Config describes one appliance. Zero values take the defaults of DefaultConfig.
type Config struct {
	// DataDir holds the state file and the volume and snapshot images. Required.
	DataDir string
	// DriverName is the plugin name GetPluginInfo reports.
	DriverName string
	// VendorVersion is the version GetPluginInfo reports.
	VendorVersion string
	// NodeID is the ID NodeGetInfo reports for this node.
	NodeID string
	// KnownNodes are further node IDs that ControllerPublishVolume accepts, for appliances
	// that serve several nodes. NodeID is always known.
	KnownNodes []string
	// Zone is the value of the topology key TopologyZoneKey for every volume and node.
	Zone string
	// CapacityBytes is the total the appliance may provision; GetCapacity reports what is left.
	CapacityBytes int64
	// MaxVolumeBytes caps one volume's size.
	MaxVolumeBytes int64
	// DefaultVolumeBytes is the size of a volume created without a capacity range.
	DefaultVolumeBytes int64
	// MaxVolumesPerNode caps how many volumes may be published to one node (0 = no limit).
	MaxVolumesPerNode int64
}

// TopologyZoneKey is the topology key of the zone segment.
const TopologyZoneKey = "topology.csi-gateway.io/zone"

// Sizes are rounded up to whole mebibytes.
const allocationUnit = 1 << 20

// DefaultConfig returns the defaults for everything but DataDir.
func DefaultConfig() Config {
	return Config{
		DriverName:         "embedded.csi-gateway.io",
		VendorVersion:      "dev",
		NodeID:             "node-1",
		Zone:               "zone-1",
		CapacityBytes:      1 << 40, // 1 TiB: images are sparse, so this is a quota, not disk use.
		MaxVolumeBytes:     1 << 40,
		DefaultVolumeBytes: 1 << 30,
		MaxVolumesPerNode:  0,
	}
}

// withDefaults fills the zero fields of c from DefaultConfig and checks the result.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	c.DriverName = cmp.Or(c.DriverName, d.DriverName)
	c.VendorVersion = cmp.Or(c.VendorVersion, d.VendorVersion)
	c.NodeID = cmp.Or(c.NodeID, d.NodeID)
	c.Zone = cmp.Or(c.Zone, d.Zone)
	c.CapacityBytes = cmp.Or(c.CapacityBytes, d.CapacityBytes)
	c.MaxVolumeBytes = cmp.Or(c.MaxVolumeBytes, d.MaxVolumeBytes)
	c.DefaultVolumeBytes = cmp.Or(c.DefaultVolumeBytes, d.DefaultVolumeBytes)
	switch {
	case c.DataDir == "":
		return c, fmt.Errorf("data directory is required")
	case c.CapacityBytes < 0 || c.MaxVolumeBytes < 0 || c.DefaultVolumeBytes < 0 || c.MaxVolumesPerNode < 0:
		return c, fmt.Errorf("sizes and limits must not be negative")
	case c.DefaultVolumeBytes > c.MaxVolumeBytes:
		return c, fmt.Errorf("default volume size %d exceeds the maximum volume size %d", c.DefaultVolumeBytes, c.MaxVolumeBytes)
	case len(c.DriverName) > 63:
		return c, fmt.Errorf("driver name %q is longer than the 63 characters CSI allows", c.DriverName)
	case len(c.NodeID) > 128:
		return c, fmt.Errorf("node ID is longer than 128 bytes")
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return c, fmt.Errorf("data directory %q: %w", c.DataDir, err)
	}
	c.DataDir = abs
	return c, nil
}

// Validate checks c as Open does, before the data directory is touched.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}
