package translate

import (
	csi "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/csi-gateway/csi-gateway/internal/csiv0"
)

// Volumes: v1's volume_id, volume_context and secrets are v0's id, attributes and
// controller_*_secrets; v0.3's content source is a snapshot only.

func volumeToV1(v *csiv0.Volume) *csi.Volume {
	if v == nil {
		return nil
	}
	out := crossed[*csi.Volume](v)
	out.ContentSource = contentSourceToV1(v.GetContentSource())
	out.AccessibleTopology = mapSlice(v.GetAccessibleTopology(), topologyToV1)
	return out
}

// volumeToV0 converts a v1 backend's volume; a clone's source (a volume) does not cross.
func volumeToV0(v *csi.Volume) *csiv0.Volume {
	if v == nil {
		return nil
	}
	out := crossed[*csiv0.Volume](v)
	out.ContentSource, _ = contentSourceToV0(v.GetContentSource())
	out.AccessibleTopology = mapSlice(v.GetAccessibleTopology(), topologyToV0)
	return out
}

func contentSourceToV1(s *csiv0.VolumeContentSource) *csi.VolumeContentSource {
	if s == nil {
		return nil
	}
	out := &csi.VolumeContentSource{}
	if snap := s.GetSnapshot(); snap != nil {
		out.Type = &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetId()}}
	}
	return out
}

// contentSourceToV0 converts a v1 content source; ok is false for a volume (a clone), which
// v0 cannot express.
func contentSourceToV0(s *csi.VolumeContentSource) (_ *csiv0.VolumeContentSource, ok bool) {
	if s == nil {
		return nil, true
	}
	out := &csiv0.VolumeContentSource{}
	switch s.GetType().(type) {
	case *csi.VolumeContentSource_Snapshot:
		out.Type = &csiv0.VolumeContentSource_Snapshot{Snapshot: &csiv0.VolumeContentSource_SnapshotSource{Id: s.GetSnapshot().GetSnapshotId()}}
	case *csi.VolumeContentSource_Volume:
		return nil, false
	}
	return out, true
}

func createVolumeToV0(r *csi.CreateVolumeRequest) (*csiv0.CreateVolumeRequest, error) {
	if len(r.GetMutableParameters()) > 0 {
		return nil, cannotCross("mutable_parameters have no CSI v0 equivalent (the driver cannot advertise MODIFY_VOLUME)")
	}
	source, ok := contentSourceToV0(r.GetVolumeContentSource())
	if !ok {
		return nil, cannotCross("a volume as content source (a clone) has no CSI v0 equivalent (the driver cannot advertise CLONE_VOLUME)")
	}
	caps, err := capabilitiesToV0(r.GetVolumeCapabilities())
	if err != nil {
		return nil, err
	}
	out := crossed[*csiv0.CreateVolumeRequest](r)
	out.CapacityRange = crossed[*csiv0.CapacityRange](r.GetCapacityRange())
	out.VolumeCapabilities, out.VolumeContentSource = caps, source
	out.AccessibilityRequirements = requirementToV0(r.GetAccessibilityRequirements())
	return out, nil
}

func createVolumeToV1(r *csiv0.CreateVolumeRequest) (*csi.CreateVolumeRequest, error) {
	out := crossed[*csi.CreateVolumeRequest](r)
	out.CapacityRange = crossed[*csi.CapacityRange](r.GetCapacityRange())
	out.VolumeCapabilities, out.VolumeContentSource = capabilitiesToV1(r.GetVolumeCapabilities()), contentSourceToV1(r.GetVolumeContentSource())
	out.AccessibilityRequirements = requirementToV1(r.GetAccessibilityRequirements())
	return out, nil
}

func createdVolumeToV1(r *csiv0.CreateVolumeResponse) *csi.CreateVolumeResponse {
	return &csi.CreateVolumeResponse{Volume: volumeToV1(r.GetVolume())}
}

func createdVolumeToV0(r *csi.CreateVolumeResponse) *csiv0.CreateVolumeResponse {
	return &csiv0.CreateVolumeResponse{Volume: volumeToV0(r.GetVolume())}
}

// validateToV0 converts a v1 ValidateVolumeCapabilities: v0 has no parameters,
// mutable_parameters nor secrets (they are not sent, and so never confirmed); a capability v0
// cannot express is answered at once, not confirmed.
func validateToV0(r *csi.ValidateVolumeCapabilitiesRequest) (*csiv0.ValidateVolumeCapabilitiesRequest, error) {
	caps, err := capabilitiesToV0(r.GetVolumeCapabilities())
	if err != nil {
		return nil, &answered{&csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}}
	}
	out := crossed[*csiv0.ValidateVolumeCapabilitiesRequest](r)
	out.VolumeCapabilities = caps
	return out, nil
}

// validatedToV1 confirms the volume context and capabilities asked about when the v0 driver
// supports them (v0 answers a bool).
func validatedToV1(resp *csiv0.ValidateVolumeCapabilitiesResponse, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	out := &csi.ValidateVolumeCapabilitiesResponse{Message: resp.GetMessage()}
	if resp.GetSupported() {
		out.Confirmed = &csi.ValidateVolumeCapabilitiesResponse_Confirmed{VolumeContext: req.GetVolumeContext(),
			VolumeCapabilities: req.GetVolumeCapabilities()}
	}
	return out, nil
}

// validateToV1 converts a v0 ValidateVolumeCapabilities; v0.3's accessible_topology has no
// v1 equivalent and is not checked.
func validateToV1(r *csiv0.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesRequest, error) {
	out := crossed[*csi.ValidateVolumeCapabilitiesRequest](r)
	out.VolumeCapabilities = capabilitiesToV1(r.GetVolumeCapabilities())
	return out, nil
}

func validatedToV0(r *csi.ValidateVolumeCapabilitiesResponse) *csiv0.ValidateVolumeCapabilitiesResponse {
	return &csiv0.ValidateVolumeCapabilitiesResponse{Supported: r.GetConfirmed() != nil, Message: r.GetMessage()}
}

func getCapacityToV0(r *csi.GetCapacityRequest) (*csiv0.GetCapacityRequest, error) {
	caps, err := capabilitiesToV0(r.GetVolumeCapabilities())
	if err != nil {
		return nil, err
	}
	out := crossed[*csiv0.GetCapacityRequest](r)
	out.VolumeCapabilities, out.AccessibleTopology = caps, topologyToV0(r.GetAccessibleTopology())
	return out, nil
}

func getCapacityToV1(r *csiv0.GetCapacityRequest) (*csi.GetCapacityRequest, error) {
	out := crossed[*csi.GetCapacityRequest](r)
	out.VolumeCapabilities, out.AccessibleTopology = capabilitiesToV1(r.GetVolumeCapabilities()), topologyToV1(r.GetAccessibleTopology())
	return out, nil
}
