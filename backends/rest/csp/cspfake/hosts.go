package cspfake

import "strconv"

// host is a registered initiator host, keyed by uuid (the CSI node id).
type host struct {
	seq            uint64
	id             string
	uuid           string
	name           string
	iqns           []string
	wwpns          []string
	nqns           []string
	networks       []string
	chapUser       string
	chapPassword   string
	accessProtocol string
	virtualDomain  string
}

// Host is a copy of a registered host, for assertions.
type Host struct {
	ID, UUID, Name                string
	IQNs, WWPNs, NQNs, Networks   []string
	CHAPUser                      string
	AccessProtocol, VirtualDomain string
}

// Hosts returns the registered hosts in creation order.
func (f *Fake) Hosts() []Host {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Host, 0, len(f.hosts))
	for _, h := range f.sortedHosts() {
		out = append(out, Host{
			ID: h.id, UUID: h.uuid, Name: h.name,
			IQNs: clone(h.iqns), WWPNs: clone(h.wwpns), NQNs: clone(h.nqns), Networks: clone(h.networks),
			CHAPUser: h.chapUser, AccessProtocol: h.accessProtocol, VirtualDomain: h.virtualDomain,
		})
	}
	return out
}

func clone(s []string) []string { return append([]string(nil), s...) }

// hostJSON is the Host answer. chap_password is echoed only by truenas-csp.
type hostJSON struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	UUID           string   `json:"uuid"`
	IQNs           []string `json:"iqns"`
	WWPNs          []string `json:"wwpns"`
	NQNs           []string `json:"nqns,omitempty"`
	Networks       []string `json:"networks"`
	CHAPUser       string   `json:"chap_user,omitempty"`
	CHAPPassword   string   `json:"chap_password,omitempty"`
	AccessProtocol string   `json:"access_protocol,omitempty"`
	VirtualDomain  string   `json:"virtual_domain,omitempty"`
}

func (f *Fake) hostJSON(h *host) hostJSON {
	j := hostJSON{
		ID: h.id, Name: h.name, UUID: h.uuid,
		IQNs: nonNil(h.iqns), WWPNs: nonNil(h.wwpns), NQNs: h.nqns, Networks: nonNil(h.networks),
		CHAPUser: h.chapUser, AccessProtocol: h.accessProtocol, VirtualDomain: h.virtualDomain,
	}
	if f.truenas() {
		j.CHAPPassword = h.chapPassword
	}
	return j
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// upsertHost is POST /hosts: create, or replace the host with the same uuid (the HPE
// driver posts the host before every publish).
func (f *Fake) upsertHost(q *request) reply {
	uuid, okUUID := stringField(q.body, "uuid")
	if !okUUID || uuid == "" {
		return f.badRequest("uuid is required")
	}
	r := fieldReader{body: q.body}
	h := &host{
		uuid: uuid, name: r.str("name"),
		iqns: r.strs("iqns"), wwpns: r.strs("wwpns"), nqns: r.strs("nqns"), networks: r.strs("networks"),
		chapUser: r.str("chap_user"), chapPassword: r.str("chap_password"),
		accessProtocol: r.str("access_protocol"), virtualDomain: r.str("virtual_domain"),
	}
	if problem := r.problem(); problem != "" {
		return f.badRequest("%s", problem)
	}
	if old, found := f.hosts[uuid]; found {
		h.seq, h.id = old.seq, old.id
	} else {
		h.seq = f.nextSeq()
		h.id = hexID()
		if f.truenas() {
			h.id = strconv.FormatUint(h.seq, 10) // an iscsi/initiator id
		}
	}
	f.addSecret(h.chapPassword)
	f.hosts[uuid] = h
	return ok(f.hostJSON(h))
}

func (f *Fake) sortedHosts() []*host {
	return inOrder(f.hosts, func(h *host) uint64 { return h.seq })
}

// listHosts is GET /hosts.
func (f *Fake) listHosts(*request) reply {
	out := make([]hostJSON, 0, len(f.hosts))
	for _, h := range f.sortedHosts() {
		out = append(out, f.hostJSON(h))
	}
	return ok(out)
}

// deleteHostByID is DELETE /hosts/{id}. The id may also be the uuid (truenas-csp looks
// hosts up by uuid).
func (f *Fake) deleteHostByID(q *request) reply {
	id := q.param("id")
	for _, h := range f.hosts {
		if h.id == id || h.uuid == id {
			return f.deleteHost(h)
		}
	}
	return f.notFoundDelete("host %s not found", id)
}

// deleteHostByUUID is DELETE /hosts?uuid=.
func (f *Fake) deleteHostByUUID(q *request) reply {
	uuid := q.queryValue("uuid")
	if uuid == "" {
		return f.badRequest("query parameter uuid is required")
	}
	h, found := f.hosts[uuid]
	if !found {
		return f.notFoundDelete("host with uuid %s not found", uuid)
	}
	return f.deleteHost(h)
}

// deleteHost refuses while volumes are published to the host (spec: "expected to fail").
func (f *Fake) deleteHost(h *host) reply {
	for _, v := range f.volumes {
		if _, published := v.pubs[h.uuid]; published {
			return f.conflict("host %s has published volumes", h.uuid)
		}
	}
	delete(f.hosts, h.uuid)
	return noContent()
}
