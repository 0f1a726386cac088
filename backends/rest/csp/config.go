package csp

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Defaults for the zero values of Config.
const (
	DefaultRequestTimeout    = 30 * time.Second
	DefaultVolumeSize        = 1 << 30 // when CreateVolume gives no capacity_range
	DefaultAccessProtocol    = "iscsi"
	DefaultDriverName        = "csp.csi-gateway.io"
	defaultMaxAttempts       = 8 // of an idempotent request answered 429 or 5xx, within the deadline
	defaultMinBackoff        = 100 * time.Millisecond
	defaultMaxBackoff        = 5 * time.Second
	maxResponseBody          = 16 << 20
	containersPath           = "/containers/v1"
	hiddenCloneSnapshotLabel = "csigw-clone-src-"
)

// Config describes one csp backend (backends.NAME with type rest, protocol csp). The field
// comments name the configuration keys.
type Config struct {
	// URL (urls[0]) is the CSP's base URL, before /containers/v1: https://array:443/csp for a
	// CSP on the array, http://csp-service:8080 for one running as a Kubernetes Service.
	URL string
	// Profile (csp.profile) is spec, hpe or truenas: what the CSP can do (see profile.go).
	Profile string
	// ArrayIP (csp.arrayIP), for a CSP that fronts several arrays, is sent as x-array-ip and
	// in the login.
	ArrayIP string
	// UsernameFile and PasswordFile (auth.usernameFile, auth.passwordFile) hold the CSP
	// user's credentials; they are read again at every login, so a rotation needs no restart.
	UsernameFile, PasswordFile string
	// RequestTimeout (requestTimeout) bounds each HTTP request of a call without a deadline.
	RequestTimeout time.Duration
	// DriverName (csp.driverName) is the name GetPluginInfo answers.
	DriverName string
	// AccessProtocol (csp.accessProtocol) is iscsi, fc or nvmetcp: how hosts reach volumes,
	// unless a volume's parameters say otherwise (accessProtocol).
	AccessProtocol string
	// Nodes (csp.nodes) are the initiators of each node, by CSI node ID (the CSP host's
	// uuid): where ControllerPublishVolume finds what to register with the CSP.
	Nodes map[string]Node
	// MutableParameters (csp.mutableParameters) are the config keys the CSP lets a volume
	// change after creation; empty: the profile's.
	MutableParameters []string
	// LookupNode, when set, is asked first (csp.nodeRegistry: the initiators node-side
	// gateways published); Nodes is the fallback.
	LookupNode func(nodeID string) (Node, bool, error)
}

// Node is what a CSP needs to know of a host to present volumes to it.
type Node struct {
	IQNs     []string `mapstructure:"iqns" yaml:"iqns,omitempty" json:"iqns,omitempty"`
	WWPNs    []string `mapstructure:"wwpns" yaml:"wwpns,omitempty" json:"wwpns,omitempty"`
	NQNs     []string `mapstructure:"nqns" yaml:"nqns,omitempty" json:"nqns,omitempty"`
	Networks []string `mapstructure:"networks" yaml:"networks,omitempty" json:"networks,omitempty"`
}

// withDefaults fills the zero fields of c and checks it; every error names its key.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		errs = append(errs, errors.New("urls: one URL is required, such as https://array.example/csp"))
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs = append(errs, errors.New("urls[0]: not an http:// or https:// URL with a host"))
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		errs = append(errs, errors.New("urls[0]: no credentials, query or fragment in the URL; credentials go in auth"))
	}
	if c.UsernameFile == "" || c.PasswordFile == "" {
		errs = append(errs, errors.New("auth: usernameFile and passwordFile are required: the CSP's user logs in with them"))
	}
	if _, err := profileNamed(c.Profile); err != nil {
		errs = append(errs, fmt.Errorf("csp.%w", err))
	}
	switch c.AccessProtocol {
	case "":
		c.AccessProtocol = DefaultAccessProtocol
	case "iscsi", "fc", "nvmetcp":
	default:
		errs = append(errs, fmt.Errorf("csp.accessProtocol: %q is not iscsi, fc or nvmetcp", c.AccessProtocol))
	}
	for id, n := range c.Nodes {
		if len(n.IQNs)+len(n.WWPNs)+len(n.NQNs) == 0 {
			errs = append(errs, fmt.Errorf("csp.nodes.%s: no initiators (iqns, wwpns or nqns)", id))
		}
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if len(c.MutableParameters) == 0 {
		p, _ := profileNamed(c.Profile)
		c.MutableParameters = p.mutable
	}
	if c.DriverName == "" {
		c.DriverName = DefaultDriverName
	}
	c.URL = strings.TrimRight(c.URL, "/")
	return c, errors.Join(errs...)
}

// Validate checks c as New would, before anything is dialled, and reports every problem,
// each prefixed with the key it is about relative to the backend.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}
