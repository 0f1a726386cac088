package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

func TestX509Identity(t *testing.T) {
	ca := testutil.NewCA(t, "test CA")
	for _, tc := range []struct {
		name       string
		leaf       testutil.Leaf
		spiffe, cn string
		dns        []string
		str        string
	}{
		{"spiffe", testutil.Leaf{CN: "c", URIs: []string{"spiffe://example.org/a"}, DNSNames: []string{"a.example.org"}},
			"spiffe://example.org/a", "c", []string{"a.example.org"}, "spiffe://example.org/a"},
		{"two spiffe URIs are none", testutil.Leaf{URIs: []string{"spiffe://example.org/a", "spiffe://example.org/b"}, DNSNames: []string{"x", "y"}},
			"", "", []string{"x", "y"}, "dns:x"},
		{"https URI is not spiffe", testutil.Leaf{CN: "only-cn", URIs: []string{"https://example.org/a"}},
			"", "only-cn", nil, "cn:only-cn"},
	} {
		kp := ca.NewLeaf(t, tc.leaf)
		id := X509Identity(kp.Cert)
		if id.Kind != "x509" || id.SPIFFEID != tc.spiffe || id.CommonName != tc.cn ||
			strings.Join(id.DNSNames(), ",") != strings.Join(tc.dns, ",") || id.String() != tc.str {
			t.Errorf("%s: %+v (%q, dns %v)", tc.name, id, id.String(), id.DNSNames())
		}
		if id != X509Identity(kp.Cert) {
			t.Errorf("%s: identities must compare equal", tc.name)
		}
	}
}

func TestTLSIdentityNeedsVerifiedChain(t *testing.T) {
	ca := testutil.NewCA(t, "test CA")
	kp := ca.NewLeaf(t, testutil.Leaf{URIs: []string{"spiffe://example.org/a"}})
	unverified := credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{kp.Cert}}}
	if id, ok := TLSIdentity(unverified); ok {
		t.Errorf("an unverified certificate gave identity %v", id)
	}
	verified := credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{kp.Cert},
		VerifiedChains: [][]*x509.Certificate{{kp.Cert, ca.Cert}}}}
	if id, ok := TLSIdentity(verified); !ok || id.SPIFFEID != "spiffe://example.org/a" {
		t.Errorf("verified: %v %v", id, ok)
	}
}

func TestClientAllowList(t *testing.T) {
	ca := testutil.NewCA(t, "test CA")
	alice := X509Identity(ca.NewLeaf(t, testutil.Leaf{CN: "alice", URIs: []string{"spiffe://example.org/alice"}}).Cert)
	bob := X509Identity(ca.NewLeaf(t, testutil.Leaf{CN: "bob", DNSNames: []string{"Bob.Example.org"}}).Cert)
	carol := X509Identity(ca.NewLeaf(t, testutil.Leaf{CN: "carol"}).Cert)
	list := ClientAllowList{Key: "listeners[1].clients", Rules: []ClientRule{
		{URI: "spiffe://example.org/alice"}, {DNS: "bob.example.org"}, {CN: "dave"},
	}}
	for _, tc := range []struct {
		name   string
		list   ClientAllowList
		id     Identity
		want   string // "" = admitted
		unauth bool
	}{
		{"spiffe listed", list, alice, "", false},
		{"dns listed, any case", list, bob, "", false},
		{"cn not listed", list, carol, "client identity cn:carol is not in listeners[1].clients", false},
		{"unix caller", list, Identity{Kind: "unix"}, "unauthenticated: no verified client certificate, and listeners[1].clients only admits listed clients", true},
		{"anonymous", list, Identity{Kind: "anonymous"}, "unauthenticated: no verified client certificate", true},
		{"empty list admits", ClientAllowList{}, Identity{Kind: "anonymous"}, "", false},
		{"cn rule does not match a spiffe ID", ClientAllowList{Key: "k", Rules: []ClientRule{{CN: "spiffe://example.org/alice"}}}, alice,
			"client identity spiffe://example.org/alice is not in k", false},
	} {
		err := tc.list.Authorize(tc.id)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		case err != nil && errors.Is(err, ErrUnauthenticated) != tc.unauth:
			t.Errorf("%s: errors.Is(ErrUnauthenticated) = %v", tc.name, !tc.unauth)
		}
	}
}

func TestClientRuleValidate(t *testing.T) {
	for _, tc := range []struct {
		rule ClientRule
		want string
	}{
		{ClientRule{URI: "spiffe://example.org/a"}, ""},
		{ClientRule{DNS: "a.example.org"}, ""},
		{ClientRule{CN: "a"}, ""},
		{ClientRule{}, "set exactly one of uri, dns or cn"},
		{ClientRule{URI: "spiffe://x", CN: "a"}, "set exactly one of uri, dns or cn"},
		{ClientRule{URI: "https://example.org"}, `uri "https://example.org" is not a spiffe:// ID`},
	} {
		err := tc.rule.Validate()
		if (err == nil) != (tc.want == "") || err != nil && err.Error() != tc.want {
			t.Errorf("%+v: %v, want %q", tc.rule, err, tc.want)
		}
	}
}
