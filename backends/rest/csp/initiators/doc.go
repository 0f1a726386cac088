// Package initiators finds the storage initiators of a node (iSCSI IQNs, Fibre Channel
// WWPNs, NVMe host NQNs) and keeps them in a node registry, a directory of one JSON file per
// node.
//
// A CSP's ControllerPublishVolume registers the node as a CSP host with its initiators
// (shared/spec/CSP-MAPPING.md §1.3 "Host" and §2), but no CSI message carries them:
// NodeGetInfo answers only a node ID. So the node side finds them locally with Read and
// publishes them with Write into a directory that the controller side also sees (shared
// by config management, NFS or a Kubernetes volume), where Lookup finds them by node ID.
// `csi-gateway initiators` does the node side by hand, and also prints the node as an
// entry to paste into the gateway's configuration.
//
// Read looks under a root directory ("/" on a node, a fixture tree in tests):
//
//   - etc/iscsi/initiatorname.iscsi, its InitiatorName= line;
//   - etc/nvme/hostnqn, its one NQN;
//   - sys/class/fc_host/host*/port_name, one WWPN per HBA port, skipping ports that cannot
//     be read or whose name is 0.
//
// A missing file is no error (a node may have only iSCSI); a file that is there but cannot
// be understood is, and the error names it. Networks are not read: they come from the
// configuration.
package initiators
