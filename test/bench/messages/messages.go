package messages

import (
	"fmt"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// The sizes of the list and stream workloads.
const (
	// ListVolumesEntries is how many entries a ListVolumes page holds.
	ListVolumesEntries = 100
	// SnapshotMetadataResponses is how many responses a GetMetadataAllocated stream sends.
	SnapshotMetadataResponses = 4
	// BlocksPerResponse is how many block ranges each of those responses carries.
	BlocksPerResponse = 32
	// blockSize is the size of one allocated range in the stream.
	blockSize = 1 << 20
)

// Zone is the topology segment every volume is created in and accessible from.
var Zone = map[string]string{"topology.csi-gateway.io/zone": "zone-1"}

// secrets are the provisioner's and node's secrets, as the Kubernetes sidecars pass them.
func secrets() map[string]string {
	return map[string]string{"username": "admin", "password": "correct-horse-battery-staple", "chapSecret": "s3cr3t-chap"}
}

// volumeContext is what CreateVolume returns and kubelet hands back to NodePublishVolume.
func volumeContext() map[string]string {
	return map[string]string{
		"storage.csi-gateway.io/pool": "gold", "storage.csi-gateway.io/tier": "premium",
		"csi.storage.k8s.io/pvc/name": "data-web-0", "csi.storage.k8s.io/pvc/namespace": "prod",
	}
}

// MountCapability is a single-node-writer ext4 filesystem with mount flags (which the spec
// calls sensitive).
func MountCapability() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: []string{"noatime", "discard"}}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}
}

// VolumeID is the ID the benchmark backend gives the volume named name.
func VolumeID(name string) string { return "vol-" + name }

// CreateVolumeRequest is external-provisioner's request for a 10 GiB volume called name.
func CreateVolumeRequest(name string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 10 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{MountCapability()},
		Parameters: map[string]string{
			"tier": "premium", "pool": "gold",
			"csi.storage.k8s.io/pvc/name": "data-web-0", "csi.storage.k8s.io/pvc/namespace": "prod",
		},
		Secrets: secrets(),
		AccessibilityRequirements: &csi.TopologyRequirement{
			Requisite: []*csi.Topology{{Segments: Zone}},
			Preferred: []*csi.Topology{{Segments: Zone}},
		},
	}
}

// CreateVolumeResponse is the backend's answer to CreateVolumeRequest(name).
func CreateVolumeResponse(name string) *csi.CreateVolumeResponse {
	return &csi.CreateVolumeResponse{Volume: volume(VolumeID(name))}
}

func volume(id string) *csi.Volume {
	return &csi.Volume{
		VolumeId: id, CapacityBytes: 10 << 30, VolumeContext: volumeContext(),
		AccessibleTopology: []*csi.Topology{{Segments: Zone}},
	}
}

// ListVolumesRequest asks for one page of ListVolumesEntries entries.
func ListVolumesRequest() *csi.ListVolumesRequest {
	return &csi.ListVolumesRequest{MaxEntries: ListVolumesEntries}
}

// ListVolumesResponse is a full page: ListVolumesEntries volumes, each published on a node,
// and a token for the next page.
func ListVolumesResponse() *csi.ListVolumesResponse {
	resp := &csi.ListVolumesResponse{NextToken: fmt.Sprint(ListVolumesEntries)}
	for i := range ListVolumesEntries {
		resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{
			Volume: volume(VolumeID(fmt.Sprintf("pvc-%08d", i))),
			Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: []string{fmt.Sprintf("node-%d", i%8)}},
		})
	}
	return resp
}

// NodePublishVolumeRequest is kubelet's request to mount volumeID into a pod.
func NodePublishVolumeRequest(volumeID string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId:         volumeID,
		PublishContext:   map[string]string{"devicePath": "/dev/disk/by-id/csi-" + volumeID, "chapSecret": "s3cr3t-chap"},
		TargetPath:       "/var/lib/kubelet/pods/5f1c6a2e-8d0b-4c1e-9a57-3b2d7e0f4a19/volumes/kubernetes.io~csi/" + volumeID + "/mount",
		VolumeCapability: MountCapability(),
		Secrets:          secrets(),
		VolumeContext:    volumeContext(),
	}
}

// GetMetadataAllocatedRequest asks for the allocated blocks of snapshotID from the start.
func GetMetadataAllocatedRequest(snapshotID string) *csi.GetMetadataAllocatedRequest {
	return &csi.GetMetadataAllocatedRequest{SnapshotId: snapshotID, MaxResults: BlocksPerResponse, Secrets: secrets()}
}

// GetMetadataAllocatedResponse is response number i (from 0) of the stream: BlocksPerResponse
// fixed-length ranges, every other megabyte allocated.
func GetMetadataAllocatedResponse(i int) *csi.GetMetadataAllocatedResponse {
	resp := &csi.GetMetadataAllocatedResponse{
		BlockMetadataType:   csi.BlockMetadataType_FIXED_LENGTH,
		VolumeCapacityBytes: 10 << 30,
	}
	for b := range BlocksPerResponse {
		offset := int64(2*(i*BlocksPerResponse+b)) * blockSize
		resp.BlockMetadata = append(resp.BlockMetadata, &csi.BlockMetadata{ByteOffset: offset, SizeBytes: blockSize})
	}
	return resp
}
