// Package csp is the rest backend's second wire protocol: the HPE Container Storage Provider
// (CSP) REST API (contract: hpe-storage/container-storage-provider openapi.yaml; the mapping
// the gateway follows: shared/spec/CSP-MAPPING.md), which HPE's array CSPs and truenas-csp
// speak.
//
// A CSP is controller-only. The backend serves Identity, Controller, GroupController and the
// csi-addons VolumeGroup controller by translating each CSI call into CSP calls:
//
//   - one session per base URL, array and user: a single-flight login (POST /tokens), the
//     token sent as x-auth-token, one fresh login and one retry on 401, never a loop;
//   - idempotency owned by the gateway: creates look the name up first, and again after a
//     failed or timed-out POST, so a create whose reply was lost never makes two objects;
//     volume clones go through a snapshot whose name is derived from the clone's, so retries
//     leak nothing;
//   - errors classified per RPC on the HTTP status only (statusRules, documented in
//     docs/errors.md); a 404 whose body is not CSP-shaped is a misconfigured URL
//     (unavailable), never "absent";
//   - capabilities per profile (spec, hpe, truenas): what a CSP cannot do is not advertised.
//
// Node RPCs are not served (UNIMPLEMENTED): route them to a node driver.
package csp
