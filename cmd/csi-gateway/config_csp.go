package main

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/csi-gateway/csi-gateway/backends"
	"github.com/csi-gateway/csi-gateway/backends/rest"
	"github.com/csi-gateway/csi-gateway/backends/rest/csp"
	"github.com/csi-gateway/csi-gateway/backends/rest/csp/initiators"
)

// CSPConfig is a rest backend's Container Storage Provider (protocol: csp): see
// docs/backends/csp.md.
type CSPConfig struct {
	Profile        string `mapstructure:"profile"`        // spec (default), hpe or truenas
	ArrayIP        string `mapstructure:"arrayIP"`        // x-array-ip, for a CSP that fronts several arrays
	DriverName     string `mapstructure:"driverName"`     // what GetPluginInfo answers
	AccessProtocol string `mapstructure:"accessProtocol"` // iscsi (default), fc or nvmetcp
	// Nodes are the initiators of each node by CSI node ID (a list: viper would fold the IDs
	// of a map to lower case); NodeRegistry is a directory where node-side gateways write
	// theirs (`csi-gateway initiators --write DIR`), read first.
	Nodes        []CSPNodeConfig `mapstructure:"nodes"`
	NodeRegistry string          `mapstructure:"nodeRegistry"`
	// MutableParameters are the config keys the CSP lets a volume change; empty: the profile's.
	MutableParameters []string `mapstructure:"mutableParameters"`
	// PlaintextHTTP allows an http:// URL, over which the CSP's password and token travel in
	// the clear: only for a CSP reached inside a trusted network (a Kubernetes Service).
	PlaintextHTTP bool `mapstructure:"plaintextHTTP"`
}

// CSPNodeConfig is one node's initiators.
type CSPNodeConfig struct {
	ID       string `mapstructure:"id"`
	csp.Node `mapstructure:",squash"`
}

func (c CSPConfig) isZero() bool {
	return c.Profile == "" && c.ArrayIP == "" && c.DriverName == "" && c.AccessProtocol == "" &&
		len(c.Nodes) == 0 && c.NodeRegistry == "" && len(c.MutableParameters) == 0 && !c.PlaintextHTTP
}

// nodes returns the static initiators by node ID.
func (c CSPConfig) nodes() map[string]csp.Node {
	m := make(map[string]csp.Node, len(c.Nodes))
	for _, n := range c.Nodes {
		m[n.ID] = n.Node
	}
	return m
}

// validateCSP records the problems of csp backend key: one URL, https unless allowed
// otherwise, credentials as a username and password file, node IDs, and what the csp package
// checks (profile, access protocol, ...).
func validateCSP(key string, b BackendConfig, errs *configErrors) {
	if len(b.URLs) != 1 {
		errs.addf(key+".urls", "a csp backend has one URL (the CSP's base URL, before /containers/v1)")
		return
	}
	if strings.HasPrefix(strings.ToLower(b.URLs[0]), "http://") && !b.CSP.PlaintextHTTP {
		errs.addf(key+".urls[0]", "http:// would send the CSP's password and token in the clear; use https:// (with tls.ca), or set csp.plaintextHTTP: true for a CSP inside a trusted network")
	}
	if b.Auth.BearerTokenFile != "" { // the csp package requires usernameFile and passwordFile
		errs.addf(key+".auth", "a CSP logs in with a user: set usernameFile and passwordFile (not bearerTokenFile)")
	}
	seen := map[string]bool{}
	for i, n := range b.CSP.Nodes {
		switch {
		case n.ID == "":
			errs.addf(fmt.Sprintf("%s.csp.nodes[%d].id", key, i), "required (the CSI node ID)")
		case seen[n.ID]:
			errs.addf(fmt.Sprintf("%s.csp.nodes[%d].id", key, i), "%q is listed twice", n.ID)
		}
		seen[n.ID] = true
	}
	errs.addEach(key+".", cspConfig(b).Validate())
}

// cspConfig is the csp package's configuration of a backend.
func cspConfig(b BackendConfig) csp.Config {
	return csp.Config{URL: b.URLs[0], Profile: b.CSP.Profile, ArrayIP: b.CSP.ArrayIP,
		UsernameFile: b.Auth.UsernameFile, PasswordFile: b.Auth.PasswordFile, RequestTimeout: b.RequestTimeout,
		DriverName: b.CSP.DriverName, AccessProtocol: b.CSP.AccessProtocol, Nodes: b.CSP.nodes(),
		MutableParameters: b.CSP.MutableParameters}
}

// openCSP opens a rest backend that speaks the CSP protocol.
func openCSP(name string, b BackendConfig, log *slog.Logger, opts []rest.Option) (backends.Backend, error) {
	cfg := cspConfig(b)
	if dir := b.CSP.NodeRegistry; dir != "" {
		cfg.LookupNode = func(nodeID string) (csp.Node, bool, error) { return initiators.Lookup(dir, nodeID) }
	}
	if b.CSP.PlaintextHTTP && strings.HasPrefix(strings.ToLower(b.URLs[0]), "http://") {
		log.Warn(fmt.Sprintf("backends.%s: plaintext HTTP: the CSP's password and token cross the network in the clear", name))
	}
	return csp.New(name, cfg, opts...)
}
