package cspfake

import "strings"

// route is one operation of openapi.yaml: its path template (as written there, relative
// to /containers/v1), method, operationId, and handler.
type route struct {
	method string
	path   string
	op     string
	handle func(*Fake, *request) reply
	group  bool // a volume-group, snapshot-group or replication route: absent in truenas
}

var routes = []route{
	{method: "POST", path: "/tokens", op: "createToken"}, // handled before authentication
	{method: "DELETE", path: "/tokens/{id}", op: "delete", handle: (*Fake).deleteToken},

	{method: "GET", path: "/hosts", op: "getHosts", handle: (*Fake).listHosts},
	{method: "POST", path: "/hosts", op: "createHost", handle: (*Fake).upsertHost},
	{method: "DELETE", path: "/hosts", op: "deleteHostByUuid", handle: (*Fake).deleteHostByUUID},
	{method: "DELETE", path: "/hosts/{id}", op: "deleteHostById", handle: (*Fake).deleteHostByID},

	{method: "GET", path: "/volumes", op: "getVolumes", handle: (*Fake).listVolumes},
	{method: "POST", path: "/volumes", op: "createVolume", handle: (*Fake).createVolume},
	{method: "GET", path: "/volumes/{id}", op: "getVolume", handle: getRecord(volumeRecord)},
	{method: "PUT", path: "/volumes/{id}", op: "editVolume", handle: (*Fake).editVolume},
	{method: "DELETE", path: "/volumes/{id}", op: "deleteVolume", handle: (*Fake).deleteVolume},
	{method: "PUT", path: "/volumes/{id}/actions/publish", op: "publishVolume", handle: (*Fake).publish},
	{method: "PUT", path: "/volumes/{id}/actions/unpublish", op: "unpublishVolume", handle: (*Fake).unpublish},

	{method: "GET", path: "/snapshots", op: "getSnapshots", handle: (*Fake).listSnapshots},
	{method: "POST", path: "/snapshots", op: "createSnapshot", handle: (*Fake).createSnapshot},
	{method: "GET", path: "/snapshots/{id}", op: "getSnapshot", handle: getRecord(snapshotRecord)},
	{method: "DELETE", path: "/snapshots/{id}", op: "deleteSnapshot", handle: (*Fake).deleteSnapshot},

	{method: "GET", path: "/volume_groups", op: "getVolumeGroups", handle: (*Fake).listVolumeGroups, group: true},
	{method: "POST", path: "/volume_groups", op: "createVolumeGroup", handle: (*Fake).createVolumeGroup, group: true},
	{method: "GET", path: "/volume_groups/{id}", op: "getVolumeGroup", handle: getRecord(volumeGroupRecord), group: true},
	{method: "DELETE", path: "/volume_groups/{id}", op: "deleteVolumeGroup", handle: (*Fake).deleteVolumeGroup, group: true},

	{method: "GET", path: "/snapshot_groups", op: "getSnapshotGroups", handle: (*Fake).listSnapshotGroups, group: true},
	{method: "POST", path: "/snapshot_groups", op: "createSnapshotGroup", handle: (*Fake).createSnapshotGroup, group: true},
	{method: "GET", path: "/snapshot_groups/{id}", op: "getSnapshotGroup", handle: getRecord(snapshotGroupRecord), group: true},
	{method: "DELETE", path: "/snapshot_groups/{id}", op: "deleteSnapshotGroup", handle: (*Fake).deleteSnapshotGroup, group: true},

	{method: "GET", path: "/replication_partners", op: "getReplicationPartners", handle: (*Fake).listReplicationPartners, group: true},
}

// match finds the route for method and rel. known reports whether some route has that
// path (so a miss is 405 rather than 404).
func match(method, rel string) (rt *route, params map[string]string, known bool) {
	for i := range routes {
		p, ok := matchPath(routes[i].path, rel)
		if !ok {
			continue
		}
		known = true
		if routes[i].method == method {
			return &routes[i], p, true
		}
	}
	return nil, nil, known
}

// matchPath matches rel against a template whose {name} segments match one non-empty
// segment each.
func matchPath(template, rel string) (map[string]string, bool) {
	ts := strings.Split(template, "/")
	rs := strings.Split(rel, "/")
	if len(ts) != len(rs) {
		return nil, false
	}
	params := map[string]string{}
	for i, t := range ts {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if rs[i] == "" {
				return nil, false
			}
			params[t[1:len(t)-1]] = rs[i]
			continue
		}
		if t != rs[i] {
			return nil, false
		}
	}
	return params, true
}
