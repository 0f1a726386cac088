// Package cspfake is an in-process fake of an HPE Container Storage Provider (CSP): the
// REST API in contract/openapi.yaml (unmodified, Apache-2.0, see contract/SOURCE), as the
// HPE CSI driver and the gateway's csp protocol use it. It is a test double for unit and
// end-to-end tests; it needs no hardware. shared/spec/CSP-MAPPING.md §7 is its
// specification.
//
// A Fake is an http.Handler. Serve it with net/http/httptest under any base path: it
// answers <prefix>/containers/v1/<route>, and a 404 with an HTML body for anything else,
// so a client with a wrong base path can tell that from "not found". All state (tokens,
// hosts, volumes, snapshots, volume and snapshot groups) is in memory.
//
// # Profiles
//
// ProfileSpec follows openapi.yaml and spec.md strictly. ProfileHPE adds what the Nimble
// CSP and the HPE driver do beyond it: in_use on snapshots. ProfileTrueNAS imitates
// truenas-csp v3 with its quirks: the session token is the password (24 h); Falcon
// {"title","description"} bodies for 400 and 401 from its middleware, which also needs an
// array IP on every call; a 500 with a Python traceback as the error message for backend
// failures (a create without config, a name with "_", a duplicate name); volume ids are
// dataset paths with "/" → "_" and snapshot ids "<volume id>@<name>"; GET /volumes
// without a name is an empty 200 body (its FIXME); GET /snapshots needs volume_id and
// answers an empty list with 404; a snapshot with a clone is "deleted" with 204 yet stays
// (hidden from answers, see Snapshot.Hidden); a published volume's delete is 409; lun_id
// is always 0; there is no FC, no volume group, snapshot group or replication route (404
// with an empty body).
//
// # Test hooks
//
// Inject queues faults per method and path: a status with any body (CSP-shaped, HTML,
// empty, bare {"code","message"}), Retry-After, latency, a dropped reply after the write
// was applied, a reply cut in the middle. ExpireTokens ends every session. Calls,
// Counters, Volumes, Snapshots and Hosts let tests assert what happened; the call log
// never shows a password, session token or CHAP secret.
//
// # Contract checks
//
// With Options.Validate every request and answer is checked against openapi.yaml with
// kin-openapi's openapi3filter. On top of it, object schemas that declare properties are
// closed (a misspelt field is reported; config objects stay free-form), and a 2xx status
// the operation does not declare is reported. The deviation list in deviations.go forgives
// what CSP-MAPPING §1.6 documents: CHAP and PeerArrayDetails in PublishInfo, a size sent
// as a numeric string, an unpublish 204 without a body, and in_use on snapshots.
// ContractViolations returns what is left.
package cspfake
