package embedded

import (
	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// topology is the one segment every volume and node of the appliance is in.
func (a *Appliance) topology() *csi.Topology {
	return &csi.Topology{Segments: map[string]string{TopologyZoneKey: a.cfg.Zone}}
}

// inZone reports whether t names the appliance's zone and nothing it does not know.
func (a *Appliance) inZone(t *csi.Topology) bool {
	for k, v := range t.GetSegments() {
		if k != TopologyZoneKey || v != a.cfg.Zone {
			return false
		}
	}
	return true
}

// checkAccessibility checks the accessibility_requirements of CreateVolume and
// CreateSnapshot: well formed, and satisfiable by the appliance's zone (else
// RESOURCE_EXHAUSTED, as the error tables of both calls require).
func (a *Appliance) checkAccessibility(req *csi.TopologyRequirement) error {
	if req == nil {
		return nil
	}
	if len(req.GetRequisite()) == 0 && len(req.GetPreferred()) == 0 {
		return invalid("accessibility_requirements: set requisite or preferred")
	}
	for _, t := range append(req.GetRequisite(), req.GetPreferred()...) {
		if err := checkMap("accessibility_requirements segment", t.GetSegments()); err != nil {
			return err
		}
	}
	if len(req.GetRequisite()) == 0 {
		return nil // only preferences: the one zone there is will do
	}
	for _, t := range req.GetRequisite() {
		if a.inZone(t) {
			return nil
		}
	}
	return status.Errorf(codes.ResourceExhausted, "accessibility_requirements.requisite does not include this appliance's topology {%s: %s}", TopologyZoneKey, a.cfg.Zone)
}
