package auth

import (
	"crypto/x509"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/credentials"
)

// ErrUnauthenticated marks an authorizer's refusal of a caller whose identity could not be
// established at all (rather than one that is known and not admitted); the refusal the
// gateway logs then starts with "unauthenticated".
var ErrUnauthenticated = errors.New("unauthenticated")

// X509Identity is the identity a verified client certificate carries: its spiffe:// URI SAN
// (only when there is exactly one, as SPIFFE requires), its DNS SANs and its subject CN.
func X509Identity(cert *x509.Certificate) Identity {
	id := Identity{Kind: "x509", CommonName: cert.Subject.CommonName, dnsNames: strings.Join(cert.DNSNames, "\n")}
	var spiffe []string
	for _, u := range cert.URIs {
		if strings.EqualFold(u.Scheme, "spiffe") {
			spiffe = append(spiffe, u.String())
		}
	}
	if len(spiffe) == 1 {
		id.SPIFFEID = spiffe[0]
	}
	return id
}

// TLSIdentity returns the identity of the peer of a TLS connection, from the leaf of its
// first verified chain. It fails closed: a peer whose certificate was not verified (no
// verified chain) has no identity, even if it presented a certificate.
func TLSIdentity(info credentials.TLSInfo) (Identity, bool) {
	chains := info.State.VerifiedChains
	if len(chains) == 0 || len(chains[0]) == 0 {
		return Identity{}, false
	}
	return X509Identity(chains[0][0]), true
}

// ClientRule admits one client identity; exactly one of URI, DNS and CN is set.
type ClientRule struct {
	URI string `mapstructure:"uri"` // a SPIFFE ID, compared exactly
	DNS string `mapstructure:"dns"` // one of the certificate's DNS SANs, case-insensitive
	CN  string `mapstructure:"cn"`  // the subject common name, compared exactly
	// Tenant, on a central gateway shared by several clusters, is the tenant the client's
	// calls act for (see proxy/tenancy); empty: the client is not confined to a tenant.
	Tenant string `mapstructure:"tenant"`
}

// Validate returns an error when the rule sets none or more than one of uri, dns and cn, or
// when uri is not a spiffe:// URI.
func (r ClientRule) Validate() error {
	n := 0
	for _, s := range []string{r.URI, r.DNS, r.CN} {
		if s != "" {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("set exactly one of uri, dns or cn")
	}
	if r.URI != "" && !strings.HasPrefix(strings.ToLower(r.URI), "spiffe://") {
		return fmt.Errorf("uri %q is not a spiffe:// ID", r.URI)
	}
	return nil
}

func (r ClientRule) matches(id Identity) bool {
	switch {
	case r.URI != "":
		return id.SPIFFEID != "" && id.SPIFFEID == r.URI
	case r.DNS != "":
		for _, d := range id.DNSNames() {
			if strings.EqualFold(d, r.DNS) {
				return true
			}
		}
		return false
	case r.CN != "":
		return id.CommonName == r.CN
	}
	return false
}

// ClientAllowList admits callers of a TLS listener whose verified certificate matches one of
// its rules. An empty list admits every caller the transport admits (with mTLS, every holder
// of a certificate the client CA signed; with plaintext, everyone). It fails closed: a caller
// without an X.509 identity is refused when the list is not empty.
type ClientAllowList struct {
	// Key names the list in refusals, e.g. "listeners[1].clients".
	Key   string
	Rules []ClientRule
}

// Authorize returns nil when id may call, or an error saying why not; a caller without an
// X.509 identity gets an error that wraps ErrUnauthenticated.
func (a ClientAllowList) Authorize(id Identity) error {
	if len(a.Rules) == 0 {
		return nil
	}
	if id.Kind != "x509" {
		return fmt.Errorf("%w: no verified client certificate, and %s only admits listed clients", ErrUnauthenticated, a.Key)
	}
	if _, ok := a.Match(id); ok {
		return nil
	}
	return fmt.Errorf("client identity %s is not in %s", id, a.Key)
}

// Match returns the first rule that admits id.
func (a ClientAllowList) Match(id Identity) (ClientRule, bool) {
	for _, r := range a.Rules {
		if r.matches(id) {
			return r, true
		}
	}
	return ClientRule{}, false
}
