// Package testutil holds what the tests of several packages share: temporary socket paths,
// canary secrets, the csi-sanity runner, helpers to start the real binary, a real etcd
// cluster (StartEtcd, from the binary $CSIGWTEST_ETCD names), and a clock tests move by hand.
package testutil
