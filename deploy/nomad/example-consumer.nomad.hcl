# A job that uses the volume: Nomad calls ControllerPublishVolume, NodeStageVolume and
# NodePublishVolume through the gateway, then the task writes a file into the volume.
# nomad job stop -purge csi-gateway-consumer unpublishes, unstages and detaches it.
#   nomad job run example-consumer.nomad.hcl

variable "volume" {
  type    = string
  default = "csi-gateway-demo"
}

variable "message" {
  type    = string
  default = "hello from nomad"
}

job "csi-gateway-consumer" {
  datacenters = ["*"]
  type        = "batch"

  group "consumer" {
    volume "data" {
      type            = "csi"
      source          = var.volume
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }

    # Block until the file is written, then stay up so its allocation keeps the volume.
    task "writer" {
      driver = "exec"   # raw_exec cannot mount CSI volumes into a task

      volume_mount {
        volume      = "data"
        destination = "/data"
      }

      config {
        command = "/bin/sh"
        args    = ["-c", "echo '${var.message}' > /data/hello.txt && sync && sleep 3600"]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }
  }
}
