package auth

import (
	"context"
	"strconv"
	"strings"
)

// Identity is who is calling, as established by the listener the call arrived on.
type Identity struct {
	// Kind is how the identity was established: "unix" (peer credentials of a Unix socket),
	// "x509" (a client certificate verified by a TLS listener) or "anonymous" (no
	// credentials could be read).
	Kind string
	// UID, GID and PID are the caller's process credentials on a Unix socket.
	UID, GID uint32
	PID      int32
	// SPIFFEID and CommonName come from a verified client certificate: its spiffe:// URI SAN
	// (empty when it has none, or more than one) and its subject CN.
	SPIFFEID, CommonName string
	// dnsNames are the certificate's DNS SANs joined by newlines, so that Identity stays
	// comparable with ==; see DNSNames.
	dnsNames string
}

// DNSNames returns the DNS SANs of a verified client certificate.
func (id Identity) DNSNames() []string {
	if id.dnsNames == "" {
		return nil
	}
	return strings.Split(id.dnsNames, "\n")
}

// String names the caller for logs and error messages: uid/gid/pid, the SPIFFE ID, the first
// DNS name or the CN, in that order of preference.
func (id Identity) String() string {
	switch id.Kind {
	case "unix":
		// Built by hand: this runs for every call's log line and record.
		b := make([]byte, 0, len("uid=4294967295 gid=4294967295 pid=-2147483648"))
		b = strconv.AppendUint(append(b, "uid="...), uint64(id.UID), 10)
		b = strconv.AppendUint(append(b, " gid="...), uint64(id.GID), 10)
		b = strconv.AppendInt(append(b, " pid="...), int64(id.PID), 10)
		return string(b)
	case "x509":
		switch {
		case id.SPIFFEID != "":
			return id.SPIFFEID
		case id.dnsNames != "":
			return "dns:" + id.DNSNames()[0]
		case id.CommonName != "":
			return "cn:" + id.CommonName
		}
		return "x509 certificate without a name"
	}
	return id.Kind
}

type identityKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the caller's identity, and false when the call carries none.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}
