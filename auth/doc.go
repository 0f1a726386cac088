// Package auth establishes who is calling (Unix peer credentials, X.509/SPIFFE identities
// from mTLS) and decides whether they may: authenticators, authorizers, tenants and quotas.
// Everything in it fails closed.
package auth
