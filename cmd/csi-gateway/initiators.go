package main

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/csi-gateway/csi-gateway/backends/rest/csp/initiators"
)

// maxNodeID is the longest node ID CSI allows (NodeGetInfoResponse.node_id: 256 bytes).
const maxNodeID = 256

var initiatorsLong = `Find this node's storage initiators and print them as an entry of a csp backend's node
list, to paste into the gateway's configuration under backends.NAME.csp.nodes:

  - {id: "node-1", iqns: ["iqn.1993-08.org.debian:01:9d3a8c1b2e4f"], wwpns: ["10:00:00:90:fa:1b:2c:3d"]}

A CSP's ControllerPublishVolume registers the node as a CSP host with its initiators, which
no CSI message carries; this is how the controller side learns them. The node's files are
read under --root:

  ` + strings.Join(initiators.Sources(), "\n  ") + `

A missing file is fine (a node may have only iSCSI); one that is there but wrong is an
error. Networks (the CIDRs of the node's iSCSI data networks) are not read: give them with
--networks.

With --write DIR the node is also stored in the node registry directory DIR (one JSON file
per node, replaced atomically), which the controller side reads when DIR is shared with it.

The node ID must be the one the node's CSI driver answers in NodeGetInfo; it defaults to the
host name. Exit status: 0, 1 when no initiator is found or a file is wrong, 64 on a usage
error.`

const initiatorsExample = `  csi-gateway initiators
  csi-gateway initiators --node-id worker-3 --networks 10.10.0.0/24,10.20.0.0/24
  csi-gateway initiators --write /var/lib/csi-gateway/nodes
  csi-gateway initiators --root /host --node-id "$NODE_NAME" --write /registry`

// initiatorsOptions are the flags of `csi-gateway initiators`.
type initiatorsOptions struct {
	root, nodeID, write string
	networks            []string
}

func newInitiatorsCommand() *cobra.Command {
	o := &initiatorsOptions{}
	noArgs := func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return finishInitiators(cmd, usagef("takes no arguments, got %q", args))
		}
		return nil
	}
	cmd := subcommand("initiators [flags]", "Print this node's iSCSI, FC and NVMe initiators for a csp backend, and store them in a node registry", noArgs,
		func(cmd *cobra.Command, _ []string) error { return finishInitiators(cmd, o.run(cmd)) })
	cmd.Long, cmd.Example = initiatorsLong, initiatorsExample
	f := cmd.Flags()
	f.StringVar(&o.root, "root", "/", "the node's root directory, where etc/ and sys/ are (a host mount in a container)")
	f.StringVar(&o.nodeID, "node-id", "", "the node's CSI node ID, as NodeGetInfo answers it (default: the host name)")
	f.StringVar(&o.write, "write", "", "also store the node in this node registry directory")
	f.StringSliceVar(&o.networks, "networks", nil, "the node's iSCSI data networks, as CIDRs (10.0.0.0/24,...)")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return finishInitiators(c, usageError{err.Error()}) })
	return cmd
}

// finishInitiators prints an error on stderr and returns its exit status: exitUsage for a
// usage error, 1 for any other.
func finishInitiators(cmd *cobra.Command, err error) error {
	if err == nil {
		return nil
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "csi-gateway initiators: %v\n", err)
	if errors.As(err, new(usageError)) {
		return exitError{code: exitUsage}
	}
	return exitError{code: 1}
}

func (o *initiatorsOptions) run(cmd *cobra.Command) error {
	id, err := o.id(cmd)
	if err != nil {
		return err
	}
	for _, n := range o.networks {
		if _, err := netip.ParsePrefix(n); err != nil {
			return usagef("--networks: %q is not a CIDR such as 10.0.0.0/24", n)
		}
	}
	if o.root == "" {
		return usagef("--root: empty")
	}

	node, err := initiators.Read(o.root)
	if err != nil {
		return err
	}
	if initiators.Empty(node) {
		return fmt.Errorf("no initiator found under %s: none of %s holds one (is the iSCSI, FC or NVMe initiator software set up?)",
			o.root, strings.Join(initiators.Sources(), ", "))
	}
	node.Networks = o.networks

	if o.write != "" {
		if err := initiators.Write(o.write, id, node); err != nil {
			return err
		}
		name, _ := initiators.FileName(id)
		fmt.Fprintf(cmd.ErrOrStderr(), "csi-gateway initiators: stored node %q in %s\n", id, filepath.Join(o.write, name))
	}
	out, err := nodeEntryYAML(id, node)
	if err != nil {
		return err
	}
	_, err = cmd.OutOrStdout().Write(out)
	return err
}

// id is --node-id, or else the host name.
func (o *initiatorsOptions) id(cmd *cobra.Command) (string, error) {
	id := o.nodeID
	if !cmd.Flags().Changed("node-id") {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("no --node-id, and the host name is unknown: %w", err)
		}
		id = h
	}
	switch {
	case id == "":
		return "", usagef("--node-id: empty")
	case len(id) > maxNodeID:
		return "", usagef("--node-id: %d bytes; CSI allows at most %d", len(id), maxNodeID)
	}
	return id, nil
}

// nodeEntryYAML renders a node as one entry of a YAML list, in flow style on one line,
// every value quoted: - {id: "ID", iqns: ["..."], wwpns: [...], nqns: [...], networks:
// [...]}. Empty lists are left out.
func nodeEntryYAML(id string, n initiators.Node) ([]byte, error) {
	str := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Style: yaml.DoubleQuotedStyle, Value: s}
	}
	entry := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	add := func(key string, v *yaml.Node) {
		entry.Content = append(entry.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	}
	add("id", str(id))
	for _, l := range []struct {
		key    string
		values []string
	}{{"iqns", n.IQNs}, {"wwpns", n.WWPNs}, {"nqns", n.NQNs}, {"networks", n.Networks}} {
		if len(l.values) == 0 {
			continue
		}
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, v := range l.values {
			seq.Content = append(seq.Content, str(v))
		}
		add(l.key, seq)
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	if err := enc.Encode(&yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{entry}}); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}
