package translate

// method is an RPC both versions have, by its name in both ("Controller/CreateVolume"), and
// how each of its messages crosses: a conversion left nil is byFields (every field that
// matters crosses as it is, renames included). A v1 caller's call of it goes to a v0 driver
// through reqToV0 and respToV1, wrapped by onV0 if set; a v0 caller's goes to a v1 backend
// through reqToV1 and respToV0. answers, when set, is both respToV1 and respToV0.
type method struct {
	name              string
	reqToV0, respToV1 conversion
	reqToV1, respToV0 conversion
	answers           conversion
	onV0              func(rpc) rpc
	v0Only, v1Target  string // a v0 method v1 lacks, answered by the v1 method v1Target
}

// methods are every method a caller of one version may call on a backend of the other. A
// v1 method missing here has no v0 equivalent (the expansion, stats, condition, get, modify
// and group RPCs, the GroupController and SnapshotMetadata services): UNIMPLEMENTED, and its
// capability is never advertised. Every v0 method is here.
var methods = []method{
	{name: "Identity/GetPluginInfo"},
	// A v0 plugin's services are CONTROLLER_SERVICE and ACCESSIBILITY_CONSTRAINTS; volume
	// expansion, group controller and snapshot metadata services do not cross to v0.
	{name: "Identity/GetPluginCapabilities", answers: capabilitiesAcross("service", lastV0PluginService.Number())},
	{name: "Identity/Probe"},

	{name: "Controller/CreateVolume",
		reqToV0: request(createVolumeToV0), respToV1: answer(createdVolumeToV1), reqToV1: request(createVolumeToV1), respToV0: answer(createdVolumeToV0)},
	{name: "Controller/DeleteVolume"},
	{name: "Controller/ControllerPublishVolume", reqToV0: capabilityToV0Request, reqToV1: capabilityToV1Request},
	{name: "Controller/ControllerUnpublishVolume", onV0: unpublishedWhenNotFound},
	{name: "Controller/ValidateVolumeCapabilities",
		reqToV0: request(validateToV0), respToV1: answerTo(validatedToV1), reqToV1: request(validateToV1), respToV0: answer(validatedToV0)},
	// A v0 listing's entries have no status (v0 has no published nodes, and
	// LIST_VOLUMES_PUBLISHED_NODES is not advertised).
	{name: "Controller/ListVolumes", respToV1: listed("volume", volumeToV1), respToV0: listed("volume", volumeToV0)},
	{name: "Controller/GetCapacity", reqToV0: request(getCapacityToV0), reqToV1: request(getCapacityToV1)},
	// v0.3 has six controller RPCs; clone, expand, readonly publish, published nodes, volume
	// condition, get, modify and the rest do not cross to v0.
	{name: "Controller/ControllerGetCapabilities", answers: capabilitiesAcross("rpc", lastV0ControllerRPC.Number())},
	{name: "Controller/CreateSnapshot", respToV1: answerTo(createdSnapshotToV1), respToV0: answer(createdSnapshotToV0)},
	{name: "Controller/DeleteSnapshot"},
	{name: "Controller/ListSnapshots", respToV1: listed("snapshot", snapshotToV1), respToV0: listed("snapshot", snapshotToV0)},

	{name: "Node/NodeStageVolume", reqToV0: capabilityToV0Request, reqToV1: capabilityToV1Request},
	{name: "Node/NodeUnstageVolume"},
	{name: "Node/NodePublishVolume", reqToV0: capabilityToV0Request, reqToV1: capabilityToV1Request, onV0: targetCreatedFirst},
	{name: "Node/NodeUnpublishVolume", onV0: targetRemovedAfter},
	// STAGE_UNSTAGE_VOLUME is v0's one node RPC capability: volume stats, expansion,
	// condition, single-node multi-writer and mount group do not cross to v0.
	{name: "Node/NodeGetCapabilities", answers: capabilitiesAcross("rpc", lastV0NodeRPC.Number())},
	{name: "Node/NodeGetInfo", respToV1: answer(nodeInfoToV1), respToV0: answer(nodeInfoToV0), onV0: orNodeGetID},
	{v0Only: "Node/NodeGetId", v1Target: "Node/NodeGetInfo"},
}

// translations are the rpcs of methods by the caller's full method name.
var translations = translationsOf(methods)

func translationsOf(ms []method) map[string]rpc {
	or := func(c conversion) conversion {
		if c == nil {
			return byFields
		}
		return c
	}
	t := map[string]rpc{}
	for _, m := range ms {
		if m.answers != nil {
			m.respToV1, m.respToV0 = m.answers, m.answers
		}
		if m.v0Only != "" {
			t[v0Prefix+m.v0Only] = convert(v0Prefix+m.v0Only, v1Prefix+m.v1Target, or(m.reqToV1), or(m.respToV0))
			continue
		}
		v1, v0 := v1Prefix+m.name, v0Prefix+m.name
		onV0 := convert(v1, v0, or(m.reqToV0), or(m.respToV1))
		if m.onV0 != nil {
			onV0 = m.onV0(onV0)
		}
		t[v1] = onV0
		t[v0] = convert(v0, v1, or(m.reqToV1), or(m.respToV0))
	}
	return t
}
