# csi-gateway as the controller plugin of a Nomad cluster, in front of an appliance's HTTP
# API. Run with plugin-node.nomad.hcl; both register plugin "csi-gateway".
#   nomad job run -var appliance_url=https://appliance.example.com:8443 plugin-controller.nomad.hcl
# The appliance token and CA come from Nomad Variables at nomad/jobs/csi-gateway-controller
# (keys token and ca_crt): nomad var put nomad/jobs/csi-gateway-controller token=@token ca_crt=@ca.crt

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

job "csi-gateway-controller" {
  datacenters = var.datacenters
  type        = "service"

  group "controller" {
    count = 2   # the gateway is stateless; Nomad calls one controller at a time

    # The admin endpoints (/healthz, /readyz, /metrics; the tap answers loopback only).
    network {
      port "admin" { to = 9808 }
    }

    service {
      name     = "csi-gateway-controller-admin"
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
        image = var.image
        args  = ["serve", "--config", "/local/config.yaml"]
        ports = ["admin"]
      }

      csi_plugin {
        id        = "csi-gateway"
        type      = "controller"
        mount_dir = "/csi"   # Nomad sets CSI_ENDPOINT=unix:///csi/csi.sock
      }

      # No listener endpoint here: the gateway serves ${CSI_ENDPOINT}, which Nomad sets to the
      # socket in mount_dir.
      template {
        destination = "local/config.yaml"
        data        = <<-EOT
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
        data        = "{{ with nomadVar \"nomad/jobs/csi-gateway-controller\" }}{{ .token }}{{ end }}"
      }

      template {
        destination = "secrets/appliance-ca.crt"
        data        = "{{ with nomadVar \"nomad/jobs/csi-gateway-controller\" }}{{ .ca_crt }}{{ end }}"
      }

      resources {
        cpu    = 100
        memory = 128
      }
    }
  }
}
