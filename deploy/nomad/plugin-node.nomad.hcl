# csi-gateway as the node plugin on every Nomad client (a system job). Node calls go to the
# appliance's Node service here; route "/csi.v1.Node/*" to a node driver instead where the
# appliance's volumes are attached by one (docs/deployment.md).
#   nomad job run -var appliance_url=https://appliance.example.com:8443 plugin-node.nomad.hcl
# privileged: Nomad's node plugins must be able to mount (the CSI spec grants node plugins
# CAP_SYS_ADMIN), and stage_publish_base_dir is shared with the host with bidirectional
# propagation by Nomad itself. The docker plugin config needs allow_privileged = true.

variable "image" {
  type    = string
  default = "ghcr.io/csi-gateway/csi-gateway:v0.1.0"
}

variable "appliance_url" {
  type = string
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

job "csi-gateway-node" {
  datacenters = var.datacenters
  type        = "system"

  group "node" {
    # The admin endpoints (/healthz, /readyz, /metrics; the tap answers loopback only).
    network {
      port "admin" { to = 9808 }
    }

    service {
      name     = "csi-gateway-node-admin"
      provider = "nomad"
      port     = "admin"
      check {
        name     = "readyz"
        type     = "http"
        path     = "/readyz"
        interval = "10s"
        timeout  = "3s"
      }
    }

    task "csi-gateway" {
      driver = "docker"

      config {
        image      = var.image
        args       = ["serve", "--config", "/local/config.yaml"]
        privileged = true
        ports      = ["admin"]
      }

      csi_plugin {
        id        = "csi-gateway"
        type      = "node"
        mount_dir = "/csi"
      }

      # No listener endpoint here: the gateway serves ${CSI_ENDPOINT}, which Nomad sets to the
      # socket in mount_dir.
      template {
        destination = "local/config.yaml"
        data        = <<-EOT
          listeners:
            - socketMode: "0600"   # endpoint: $CSI_ENDPOINT
          backends:
            appliance:
              type: rest
              urls: ["${var.appliance_url}"]
              tls: {ca: /secrets/appliance-ca.crt}
              auth: {bearerTokenFile: /secrets/appliance-token}
          routes:
            - {methods: ["*"], backend: appliance}
          admin: {listen: "0.0.0.0:9808"}
          logging: {level: info, format: json}
        EOT
      }

      template {
        destination = "secrets/appliance-token"
        perms       = "0400"
        data        = "{{ with nomadVar \"nomad/jobs/csi-gateway-node\" }}{{ .token }}{{ end }}"
      }

      template {
        destination = "secrets/appliance-ca.crt"
        data        = "{{ with nomadVar \"nomad/jobs/csi-gateway-node\" }}{{ .ca_crt }}{{ end }}"
      }

      resources {
        cpu    = 100
        memory = 128
      }
    }
  }
}
