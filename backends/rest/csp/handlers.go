package csp

import (
	"context"

	"google.golang.org/protobuf/proto"
)

// handler serves one CSI method from the CSP.
type handler struct {
	newRequest func() proto.Message
	serve      func(ctx context.Context, b *Backend, req proto.Message) (proto.Message, error)
}

// typed adapts a method of Backend with typed messages to a handler.
func typed[Req, Resp proto.Message](f func(*Backend, context.Context, Req) (Resp, error)) handler {
	var zero Req
	return handler{
		newRequest: func() proto.Message { return zero.ProtoReflect().Type().New().Interface() },
		serve: func(ctx context.Context, b *Backend, req proto.Message) (proto.Message, error) {
			return f(b, ctx, req.(Req))
		},
	}
}

// handlers are the methods a CSP serves, by full method name.
var handlers = map[string]handler{
	"/csi.v1.Identity/GetPluginInfo":                         typed((*Backend).getPluginInfo),
	"/csi.v1.Identity/GetPluginCapabilities":                 typed((*Backend).getPluginCapabilities),
	"/csi.v1.Identity/Probe":                                 typed((*Backend).probe),
	"/csi.v1.Controller/ControllerGetCapabilities":           typed((*Backend).controllerGetCapabilities),
	"/csi.v1.Controller/CreateVolume":                        typed((*Backend).createVolume),
	"/csi.v1.Controller/DeleteVolume":                        typed((*Backend).deleteVolume),
	"/csi.v1.Controller/ControllerGetVolume":                 typed((*Backend).controllerGetVolume),
	"/csi.v1.Controller/ValidateVolumeCapabilities":          typed((*Backend).validateVolumeCapabilities),
	"/csi.v1.Controller/ListVolumes":                         typed((*Backend).listVolumes),
	"/csi.v1.Controller/ControllerExpandVolume":              typed((*Backend).controllerExpandVolume),
	"/csi.v1.Controller/ControllerModifyVolume":              typed((*Backend).controllerModifyVolume),
	"/csi.v1.Controller/ControllerPublishVolume":             typed((*Backend).controllerPublishVolume),
	"/csi.v1.Controller/ControllerUnpublishVolume":           typed((*Backend).controllerUnpublishVolume),
	"/csi.v1.Controller/CreateSnapshot":                      typed((*Backend).createSnapshot),
	"/csi.v1.Controller/DeleteSnapshot":                      typed((*Backend).deleteSnapshot),
	"/csi.v1.Controller/ListSnapshots":                       typed((*Backend).listSnapshots),
	"/csi.v1.Controller/GetSnapshot":                         typed((*Backend).getSnapshotInfo),
	"/csi.v1.GroupController/GroupControllerGetCapabilities": typed((*Backend).groupControllerGetCapabilities),
	"/csi.v1.GroupController/CreateVolumeGroupSnapshot":      typed((*Backend).createVolumeGroupSnapshot),
	"/csi.v1.GroupController/DeleteVolumeGroupSnapshot":      typed((*Backend).deleteVolumeGroupSnapshot),
	"/csi.v1.GroupController/GetVolumeGroupSnapshot":         typed((*Backend).getVolumeGroupSnapshot),
	"/volumegroup.Controller/CreateVolumeGroup":              typed((*Backend).createVolumeGroup),
	"/volumegroup.Controller/ModifyVolumeGroupMembership":    typed((*Backend).modifyVolumeGroupMembership),
	"/volumegroup.Controller/DeleteVolumeGroup":              typed((*Backend).deleteVolumeGroup),
	"/volumegroup.Controller/ListVolumeGroups":               typed((*Backend).listVolumeGroups),
	"/volumegroup.Controller/ControllerGetVolumeGroup":       typed((*Backend).controllerGetVolumeGroup),
}
