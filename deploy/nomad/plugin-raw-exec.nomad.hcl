# csi-gateway as a monolith plugin (controller and node in one task) from a binary on the
# host, with raw_exec: for hosts without Docker, and what make e2e runs. The gateway forwards
# every call to a CSI driver's socket on the host (backend_target), e.g. the reference
# appliance:
#   csi-gateway appliance --data /var/lib/csigw-appliance --endpoint unix:///run/csigw/appliance.sock
#   nomad job run -var binary=/usr/local/bin/csi-gateway \
#     -var backend_target=unix:///run/csigw/appliance.sock \
#     -var stage_publish_base_dir=/var/lib/nomad/client/csi/monolith/csi-gateway plugin-raw-exec.nomad.hcl
# raw_exec runs the task as the Nomad client's user (root) in the host's mount namespace, so
# the mounts its backend makes are the host's. The client needs plugin "raw_exec" enabled.

variable "binary" {
  type    = string
  default = "/usr/local/bin/csi-gateway"
}

variable "backend_target" {
  type    = string
  default = "unix:///run/csigw/appliance.sock"
}

# Where Nomad asks the plugin to stage and publish: with raw_exec the plugin sees the host's
# paths, so this must be the host path of the client's csi/monolith/<plugin id> directory
# (<client data_dir>/client/csi/monolith/csi-gateway).
variable "stage_publish_base_dir" {
  type    = string
  default = "/var/lib/nomad/client/csi/monolith/csi-gateway"
}

variable "plugin_id" {
  type    = string
  default = "csi-gateway"
}

variable "log_level" {
  type    = string
  default = "info"
}

job "csi-gateway-plugin" {
  datacenters = ["*"]
  type        = "system"

  group "plugin" {
    # The admin endpoints (/healthz, /readyz, /metrics; the tap answers loopback only), on a
    # port Nomad picks on the client's address.
    network {
      port "admin" {}
    }

    service {
      name     = "csi-gateway-plugin-admin"
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
      driver = "raw_exec"

      config {
        command = var.binary
        args    = ["serve", "--config", "${NOMAD_TASK_DIR}/config.yaml"]
      }

      csi_plugin {
        id                     = var.plugin_id
        type                   = "monolith"
        mount_dir              = "/csi"
        stage_publish_base_dir = var.stage_publish_base_dir
      }

      # No listener here: the gateway serves ${CSI_ENDPOINT}, which Nomad sets to the socket
      # in mount_dir.
      template {
        destination = "local/config.yaml"
        data        = <<-EOT
          backends:
            driver:
              type: grpc
              target: ${var.backend_target}
          routes:
            - {methods: ["*"], backend: driver}
          admin: {listen: "{{ env "NOMAD_ADDR_admin" }}"}
          logging: {level: ${var.log_level}, format: json}
        EOT
      }

      resources {
        cpu    = 100
        memory = 128
      }
    }
  }
}
