# A volume on plugin "csi-gateway": nomad volume create volume.hcl (CreateVolume through the
# gateway); nomad volume delete csi-gateway-demo (DeleteVolume).
id        = "csi-gateway-demo"
name      = "csi-gateway-demo"
type      = "csi"
plugin_id = "csi-gateway"

capacity_min = "1GiB"
capacity_max = "2GiB"

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}

mount_options {
  fs_type = "ext4"
}

# Where the volume must be reachable. The reference appliance reports the topology key
# topology.csi-gateway.io/zone (--zone, default zone-1). Keep this block: without it Nomad
# (1.9) sends CreateVolume an empty accessibility_requirements, which the CSI spec forbids.
# The gateway lets it through as "no requirement", but the reference appliance, strict to the
# spec, refuses it with INVALID_ARGUMENT.
topology_request {
  required {
    topology {
      segments {
        "topology.csi-gateway.io/zone" = "zone-1"
      }
    }
  }
}
