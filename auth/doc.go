// Package auth establishes who is calling and decides whether they may. Who: Unix peer
// credentials read with SO_PEERCRED in the handshake (UnixPeerCredentials), or the
// X.509/SPIFFE identity of a verified client certificate (TLSIdentity). Whether: allow-lists
// by UID and GID (UIDAllowList), by client identity (ClientAllowList of ClientRules, which may
// name the tenant a client acts for) and by method (MethodAllowList); each refusal is an error
// that says why. Identities and tenants travel in the context (NewContext, FromContext,
// WithTenant). Everything in it fails closed.
//
// It holds no tenancy logic (scoping, ownership, quotas: proxy/tenancy) and no middleware
// (proxy's admission and confine use it).
package auth
