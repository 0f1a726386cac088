// Package testutil holds what the tests of several packages share: temporary socket paths,
// canary secrets, the csi-sanity runner and helpers to start the real binary.
package testutil
