package rest

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/backends"
)

// A connect backend over http:// sends each request as it is: a request's CSI secrets (the
// fields the spec marks csi_secret, such as CreateVolume's secrets) would cross the network
// in the clear. The gateway's own credentials (auth) are never sent over http://; the
// request's secrets are refused there too unless the operator opts in with
// Config.AllowSecretsOverPlaintextHTTP, as a csp backend needs csp.plaintextHTTP.

// plaintextKey is the configuration key of the opt-in, relative to the backend.
const plaintextKey = "allowSecretsOverPlaintextHTTP"

// firstPlaintextURL returns the index of the first http:// URL of urls, or -1.
func firstPlaintextURL(urls []string) int {
	for i, raw := range urls {
		if strings.HasPrefix(strings.ToLower(raw), "http://") {
			return i
		}
	}
	return -1
}

// PlaintextWarning is what to log when the backend called name starts with c: which of its
// URLs is http:// and what happens to the CSI secrets of requests because of it; "" when
// every URL is https://.
func (c Config) PlaintextWarning(name string) string {
	i := firstPlaintextURL(c.URLs)
	switch {
	case i < 0:
		return ""
	case c.AllowSecretsOverPlaintextHTTP:
		return fmt.Sprintf("backends.%s.%s: true: the CSI secrets of requests cross the network in the clear to backends.%s.urls[%d] (http://); use https:// (with tls.ca) unless that network is trusted",
			name, plaintextKey, name, i)
	}
	return fmt.Sprintf("backends.%s.urls[%d] is http://: requests that carry CSI secrets are refused (FAILED_PRECONDITION); use https:// (with tls.ca), or set backends.%s.%s: true to send them in the clear",
		name, i, name, plaintextKey)
}

// refusePlaintextSecrets returns the ClassPrecondition error that refuses req, a request of
// m, when it carries CSI secrets, the backend has an http:// URL (a call may fail over to it)
// and the operator has not opted in; nil otherwise. It looks into req only in that case.
//
// Precondition, not invalid: the request is right, the gateway's configuration is what must
// change (FAILED_PRECONDITION tells the caller that retrying the same request will not help
// until the system changes), and the message says which key to set.
func (b *Backend) refusePlaintextSecrets(m *method, req proto.Message) error {
	i := firstPlaintextURL(b.cfg.URLs)
	if i < 0 || b.cfg.AllowSecretsOverPlaintextHTTP || !backends.CarriesSecrets(req.ProtoReflect()) {
		return nil
	}
	return newError(backends.ClassPrecondition, b.name, m.name, fmt.Sprintf(
		"the request carries CSI secrets, and backends.%s.urls[%d] (%s) is http://, which would send them in the clear; "+
			"use https:// (with tls.ca), or set backends.%s.%s: true if the network to the appliance is trusted",
		b.name, i, b.urls[i].display, b.name, plaintextKey))
}
