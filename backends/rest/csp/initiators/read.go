package initiators

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/csi-gateway/csi-gateway/backends/rest/csp"
)

// Node is a node's initiators and networks, as the csp backend registers them with a CSP.
type Node = csp.Node

// Read finds the initiators of the node whose filesystem is at root ("/" in production).
// A node without any initiator gets an empty Node and no error; see Empty.
func Read(root string) (Node, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return Node{}, fmt.Errorf("root %s: %w", root, err)
	}
	if !fi.IsDir() {
		return Node{}, fmt.Errorf("root %s: not a directory", root)
	}
	var n Node
	var errs []error
	if n.IQNs, err = readIQNs(root); err != nil {
		errs = append(errs, err)
	}
	if n.WWPNs, err = readWWPNs(root); err != nil {
		errs = append(errs, err)
	}
	if n.NQNs, err = readNQNs(root); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Node{}, err
	}
	return n, nil
}

// Empty reports whether n has no initiator at all (networks do not count).
func Empty(n Node) bool { return len(n.IQNs)+len(n.WWPNs)+len(n.NQNs) == 0 }

// Sources returns the files Read looks at, relative to its root, for messages.
func Sources() []string { return []string{iscsiFile, nvmeFile, fcGlob} }

// appendUnique appends s to list unless it is there already.
func appendUnique(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
