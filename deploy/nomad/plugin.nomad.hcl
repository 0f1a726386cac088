# csi-gateway as a Nomad CSI plugin: one job file for the controller, the node and the
# monolith plugin, chosen with -var plugin_type. Controller and node run the image with the
# docker driver in front of an appliance's HTTP API (appliance_url); both register plugin
# "csi-gateway":
#   nomad job run -var plugin_type=controller -var appliance_url=https://appliance.example.com:8443 plugin.nomad.hcl
#   nomad job run -var plugin_type=node -var appliance_url=https://appliance.example.com:8443 plugin.nomad.hcl
# The appliance token and CA come from Nomad Variables at nomad/jobs/<job> (keys token and
# ca_crt): nomad var put nomad/jobs/csi-gateway-controller token=@token ca_crt=@ca.crt
# (likewise nomad/jobs/csi-gateway-node). The node plugin is privileged: Nomad's node plugins
# must be able to mount (the CSI spec grants node plugins CAP_SYS_ADMIN), and
# stage_publish_base_dir is shared with the host with bidirectional propagation by Nomad
# itself. The docker plugin config needs allow_privileged = true.
#
# The monolith (controller and node in one task, the default plugin_type) can run a binary
# from the host with -var driver=raw_exec: for hosts without Docker, and what make e2e runs.
# Without appliance_url the gateway forwards every call to a CSI driver's socket
# (backend_target), e.g. the reference appliance on the host:
#   csi-gateway appliance --data /var/lib/csigw-appliance --endpoint unix:///run/csigw/appliance.sock
#   nomad job run -var driver=raw_exec -var binary=/usr/local/bin/csi-gateway \
#     -var backend_target=unix:///run/csigw/appliance.sock \
#     -var stage_publish_base_dir=/var/lib/nomad/client/csi/monolith/csi-gateway plugin.nomad.hcl
# raw_exec runs the task as the Nomad client's user (root) in the host's mount namespace, so
# the mounts its backend makes are the host's. The client needs plugin "raw_exec" enabled.

variable "plugin_type" {
  type    = string
  default = "monolith"
  validation {
    condition     = contains(["controller", "node", "monolith"], var.plugin_type)
    error_message = "The plugin_type must be controller, node or monolith."
  }
}

# docker runs var.image; raw_exec runs var.binary from the host.
variable "driver" {
  type    = string
  default = "docker"
  validation {
    condition     = contains(["docker", "raw_exec"], var.driver)
    error_message = "The driver must be docker or raw_exec."
  }
}

variable "image" {
  type    = string
  default = "ghcr.io/csi-gateway/csi-gateway:v0.1.0"
}

variable "binary" {
  type    = string
  default = "/usr/local/bin/csi-gateway"
}

# The backend: the appliance's HTTP API when set, else the CSI driver at backend_target.
variable "appliance_url" {
  type    = string
  default = ""
}

variable "backend_target" {
  type    = string
  default = "unix:///run/csigw/appliance.sock"
}

# Where Nomad asks a node or monolith plugin to stage and publish. With raw_exec the plugin
# sees the host's paths, so this must be the host path of the client's
# csi/monolith/<plugin id> directory (<client data_dir>/client/csi/monolith/csi-gateway);
# "" leaves Nomad's default (the path inside the plugin's container).
variable "stage_publish_base_dir" {
  type    = string
  default = ""
}

variable "plugin_id" {
  type    = string
  default = "csi-gateway"
}

variable "log_level" {
  type    = string
  default = "info"
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

locals {
  job = "csi-gateway-${var.plugin_type}"
}

job "csi-gateway" {
  id          = local.job
  name        = local.job
  datacenters = var.datacenters
  # The controller is a service (the gateway is stateless; Nomad calls one controller at a
  # time); node and monolith plugins run on every client.
  type = var.plugin_type == "controller" ? "service" : "system"

  group "plugin" {
    count = var.plugin_type == "controller" ? 2 : 1

    # The admin endpoints (/healthz, /readyz, /metrics; the tap answers loopback only): port
    # 9808 in the docker container, or with raw_exec a port Nomad picks on the client's address.
    network {
      port "admin" {
        to = var.driver == "docker" ? 9808 : 0   # raw_exec: the port Nomad picks
      }
    }

    service {
      name     = "${local.job}-admin"
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
      driver = var.driver

      dynamic "config" {
        for_each = var.driver == "docker" ? [1] : []
        content {
          image      = var.image
          args       = ["serve", "--config", "$${NOMAD_TASK_DIR}/config.yaml"]
          privileged = var.plugin_type != "controller"
          ports      = ["admin"]
        }
      }

      dynamic "config" {
        for_each = var.driver == "raw_exec" ? [1] : []
        content {
          command = var.binary
          args    = ["serve", "--config", "$${NOMAD_TASK_DIR}/config.yaml"]
        }
      }

      csi_plugin {
        id                     = var.plugin_id
        type                   = var.plugin_type
        mount_dir              = "/csi"   # Nomad sets CSI_ENDPOINT=unix:///csi/csi.sock
        stage_publish_base_dir = var.stage_publish_base_dir
      }

      # No listener endpoint here: the gateway serves ${CSI_ENDPOINT}, which Nomad sets to the
      # socket in mount_dir.
      template {
        destination = "local/config.yaml"
        data        = <<-EOT
          listeners:
            - socketMode: "0600"   # endpoint: $CSI_ENDPOINT
          backends:
            appliance:%{ if var.appliance_url != "" }
              type: rest
              urls: ["${var.appliance_url}"]
              tls: {ca: '{{ env "NOMAD_SECRETS_DIR" }}/appliance-ca.crt'}
              auth: {bearerTokenFile: '{{ env "NOMAD_SECRETS_DIR" }}/appliance-token'}%{ else }
              type: grpc
              target: ${var.backend_target}%{ endif }
          routes:
            - {methods: ["*"], backend: appliance}
          admin: {listen: "%{ if var.driver == "docker" }0.0.0.0:9808%{ else }{{ env "NOMAD_ADDR_admin" }}%{ endif }"}
          logging: {level: ${var.log_level}, format: json}
        EOT
      }

      dynamic "template" {
        for_each = var.appliance_url != "" ? { "appliance-token" = "token", "appliance-ca.crt" = "ca_crt" } : {}
        content {
          destination = "secrets/${template.key}"
          perms       = "0400"
          data        = "{{ with nomadVar \"nomad/jobs/${local.job}\" }}{{ .${template.value} }}{{ end }}"
        }
      }

      resources {
        cpu    = 100
        memory = 128
      }
    }
  }
}
