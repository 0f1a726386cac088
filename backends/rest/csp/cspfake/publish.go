package cspfake

// publication is one (volume, host) access grant.
type publication struct {
	lun      int64
	protocol string
}

// Discovery portals the fake advertises (TEST-NET-1 addresses).
var (
	nimbleDiscoveryIPs  = []string{"192.0.2.10", "192.0.2.11"}
	trueNASDiscoveryIPs = []string{"192.0.2.20"}
)

// publishJSON is the PublishInfo answer. chap_user and chap_password are not in
// openapi.yaml but spec.md requires them when the host has CHAP (deviation list).
type publishJSON struct {
	SerialNumber   string   `json:"serial_number"`
	AccessProtocol string   `json:"access_protocol"`
	LunID          int64    `json:"lun_id"`
	TargetNames    []string `json:"target_names,omitempty"`
	DiscoveryIPs   []string `json:"discovery_ips,omitempty"`
	CHAPUser       *string  `json:"chap_user,omitempty"`
	CHAPPassword   *string  `json:"chap_password,omitempty"`
}

// publish is PUT /volumes/{id}/actions/publish. It is idempotent per (volume, host): a
// second publish answers the same LUN.
func (f *Fake) publish(q *request) reply {
	return withRecord(f, q, volumeRecord, func(v *volume) reply {
		r := fieldReader{body: q.body}
		uuid, protocol := r.str("host_uuid"), r.str("access_protocol")
		if problem := r.problem("host_uuid"); problem != "" {
			return f.badRequest("%s", problem)
		}
		h := f.hosts[uuid]
		if h == nil {
			return f.notFound("host with uuid %s not found", uuid)
		}
		p := v.pubs[uuid]
		if p == nil {
			if protocol == "" {
				protocol = h.accessProtocol
			}
			if protocol == "" {
				protocol = "iscsi"
			}
			switch {
			case protocol != "iscsi" && (protocol != "fc" || f.truenas()):
				return f.badRequest("unsupported access_protocol %q", protocol)
			case protocol == "iscsi" && len(h.iqns) == 0:
				return f.badRequest("host %s has no iSCSI initiators (iqns)", uuid)
			case protocol == "fc" && len(h.wwpns) == 0:
				return f.badRequest("host %s has no FC initiators (wwpns)", uuid)
			}
			p = &publication{lun: f.freeLUN(uuid), protocol: protocol}
			v.pubs[uuid] = p
		}
		answer := publishJSON{SerialNumber: v.serial, AccessProtocol: p.protocol, LunID: p.lun}
		if p.protocol == "iscsi" {
			answer.TargetNames, answer.DiscoveryIPs = f.target(v)
			// truenas-csp always sends both, empty when the host has no CHAP.
			if h.chapUser != "" || f.truenas() {
				answer.CHAPUser, answer.CHAPPassword = &h.chapUser, &h.chapPassword
			}
		}
		return ok(answer)
	})
}

// target returns the volume's iSCSI target names and discovery portals.
func (f *Fake) target(v *volume) ([]string, []string) {
	if f.truenas() {
		return []string{"iqn.2011-08.org.truenas.ctl:" + v.name}, trueNASDiscoveryIPs
	}
	return []string{"iqn.2007-11.com.nimblestorage:" + v.name + "-v" + v.serial[:16]}, nimbleDiscoveryIPs
}

// freeLUN returns the lowest LUN not in use on the host; truenas-csp always uses 0 (one
// target per volume).
func (f *Fake) freeLUN(uuid string) int64 {
	if f.truenas() {
		return 0
	}
	used := map[int64]bool{}
	for _, v := range f.volumes {
		if p := v.pubs[uuid]; p != nil {
			used[p.lun] = true
		}
	}
	var lun int64
	for used[lun] {
		lun++
	}
	return lun
}

// unpublish is PUT /volumes/{id}/actions/unpublish: 204 with no body, also when the
// volume was not published to the host.
func (f *Fake) unpublish(q *request) reply {
	return withRecord(f, q, volumeRecord, func(v *volume) reply {
		uuid, okUUID := stringField(q.body, "host_uuid")
		if !okUUID || uuid == "" {
			return f.badRequest("host_uuid is required")
		}
		if f.hosts[uuid] == nil {
			return f.notFound("host with uuid %s not found", uuid)
		}
		delete(v.pubs, uuid)
		return noContent()
	})
}
