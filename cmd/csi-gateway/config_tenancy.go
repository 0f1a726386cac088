package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

// TenancyConfig makes the gateway a central one shared by tenants (clusters): callers are
// given a tenant by their listener (listeners[].tenant) or their client rule
// (listeners[].clients[].tenant), and each tenant sees only its own objects.
type TenancyConfig struct {
	// Ledger is the shorthand of Store.Bbolt.Path: the file that records which tenant owns
	// which backend object. Back it up with the backend's state.
	Ledger string `mapstructure:"ledger"`
	// Store is where the ledger is kept: a bbolt file (one central gateway) or etcd (any
	// number of replicas); one of it or Ledger is required when tenants are configured.
	Store TenancyStoreConfig `mapstructure:"store"`
	// TokenKeyFile holds the key that seals the pagination tokens tenants are given (32
	// random bytes, raw or in hex): replicas with the same key accept each other's tokens.
	// Empty: a random key per process, so tokens do not survive a restart.
	TokenKeyFile string `mapstructure:"tokenKeyFile"`
	// Tenants are the tenants and their quotas. (A list rather than a map keyed by name:
	// viper drops map entries whose value is empty, such as a tenant without quotas.)
	Tenants []TenantConfig `mapstructure:"tenants"`
}

// TenantConfig is one tenant: its name and its quotas (zero: unlimited).
type TenantConfig struct {
	Name          string `mapstructure:"name"`
	tenancy.Quota `mapstructure:",squash"`
}

// TenancyStoreConfig is one of a bbolt file and etcd.
type TenancyStoreConfig struct {
	Bbolt *BboltStoreConfig `mapstructure:"bbolt"`
	Etcd  *EtcdStoreConfig  `mapstructure:"etcd"`
}

// BboltStoreConfig is the ledger in a bbolt file, which one process opens at a time.
type BboltStoreConfig struct {
	Path string `mapstructure:"path"`
}

// EtcdStoreConfig is the ledger in etcd, shared by the central gateway's replicas.
type EtcdStoreConfig struct {
	// Endpoints are the members' client URLs (https://host:2379 with tls, or host:port).
	Endpoints []string `mapstructure:"endpoints"`
	// TLS verifies etcd's certificates and presents the gateway's client certificate.
	TLS *BackendTLSConfig `mapstructure:"tls"`
	// Prefix of the ledger's keys, shared by the replicas (default /csi-gateway/).
	Prefix string `mapstructure:"prefix"`
	// LeaseTTL: how long a dead replica's quota holds outlive it (default 10s).
	LeaseTTL time.Duration `mapstructure:"leaseTTL"`
	// RequestTimeout bounds each request to etcd (default 5s).
	RequestTimeout time.Duration `mapstructure:"requestTimeout"`
}

// enabled reports whether a ledger is configured, which turns tenancy on.
func (t TenancyConfig) enabled() bool {
	return t.Ledger != "" || t.Store.Bbolt != nil || t.Store.Etcd != nil
}

// openStore opens the configured store and says what it is, for the log. Its errors name
// the key at fault.
func (t TenancyConfig) openStore(log *slog.Logger) (tenancy.Store, string, error) {
	if e := t.Store.Etcd; e != nil {
		cfg := tenancy.EtcdConfig{Endpoints: e.Endpoints, Prefix: e.Prefix, LeaseTTL: e.LeaseTTL, RequestTimeout: e.RequestTimeout}
		if e.TLS != nil {
			tc, err := clientTLS("tenancy.store.etcd.tls", *e.TLS, log)
			if err != nil {
				return nil, "", err
			}
			cfg.TLS = tc
		}
		store, err := tenancy.OpenEtcd(cfg)
		if err != nil {
			return nil, "", fmt.Errorf("tenancy.store.etcd: %w", err)
		}
		return store, "etcd " + strings.Join(e.Endpoints, ","), nil
	}
	key, path := "tenancy.ledger", t.Ledger
	if t.Store.Bbolt != nil {
		key, path = "tenancy.store.bbolt.path", t.Store.Bbolt.Path
	}
	store, err := tenancy.OpenBolt(path)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", key, err)
	}
	return store, "bbolt " + path, nil
}

// validateStore checks tenancy.store (and its shorthand tenancy.ledger).
func (t TenancyConfig) validateStore() error {
	s := t.Store
	switch {
	case t.Ledger != "" && (s.Bbolt != nil || s.Etcd != nil):
		return fmt.Errorf("tenancy.ledger: is the shorthand of tenancy.store.bbolt.path; give tenancy.ledger or tenancy.store, not both")
	case s.Bbolt != nil && s.Etcd != nil:
		return fmt.Errorf("tenancy.store: give one of bbolt and etcd")
	case len(t.Tenants) > 0 && !t.enabled():
		return fmt.Errorf("tenancy.store: required with tenants: tenancy.store.bbolt.path (or its shorthand tenancy.ledger), a file such as /var/lib/csi-gateway/tenancy.db, for one central gateway; tenancy.store.etcd for replicas")
	case s.Bbolt != nil && s.Bbolt.Path == "":
		return fmt.Errorf("tenancy.store.bbolt.path: required (a file, e.g. /var/lib/csi-gateway/tenancy.db)")
	case s.Etcd != nil:
		return s.Etcd.validate()
	}
	return nil
}

// validate checks tenancy.store.etcd.
func (e EtcdStoreConfig) validate() error {
	const key = "tenancy.store.etcd"
	if len(e.Endpoints) == 0 {
		return fmt.Errorf("%s.endpoints: required (the etcd members' client URLs, e.g. https://etcd-0.etcd:2379)", key)
	}
	for i, ep := range e.Endpoints {
		if err := validEtcdEndpoint(ep, e.TLS != nil); err != nil {
			return fmt.Errorf("%s.endpoints[%d]: %w", key, i, err)
		}
	}
	if e.TLS != nil {
		if err := validateClientTLS(key+".tls", *e.TLS); err != nil {
			return err
		}
	}
	switch {
	case e.Prefix != "" && !strings.HasSuffix(e.Prefix, "/"):
		return fmt.Errorf("%s.prefix: %q must end in / (so that it is not the beginning of another gateway's prefix)", key, e.Prefix)
	case e.LeaseTTL < 0 || (e.LeaseTTL > 0 && e.LeaseTTL < time.Second):
		return fmt.Errorf("%s.leaseTTL: %s is not a duration of 1s or more (default %s)", key, e.LeaseTTL, tenancy.DefaultEtcdLeaseTTL)
	case e.RequestTimeout < 0:
		return fmt.Errorf("%s.requestTimeout: %s is negative (default %s)", key, e.RequestTimeout, tenancy.DefaultEtcdRequestTimeout)
	}
	return nil
}

// validEtcdEndpoint checks an etcd client URL: http:// or https:// (matching whether tls is
// set) or a bare host:port.
func validEtcdEndpoint(ep string, tls bool) error {
	hostPort := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return err
		}
		switch {
		case u.Scheme != "http" && u.Scheme != "https":
			return fmt.Errorf("%q: the scheme is not http or https", ep)
		case u.Scheme == "http" && tls:
			return fmt.Errorf("%q: http:// with tls set; use https://", ep)
		case u.Scheme == "https" && !tls:
			return fmt.Errorf("%q: https:// needs tenancy.store.etcd.tls (at least its ca)", ep)
		case u.Path != "" && u.Path != "/":
			return fmt.Errorf("%q: a client URL has no path", ep)
		}
		hostPort = u.Host
	}
	if _, port, err := net.SplitHostPort(hostPort); err != nil || port == "" {
		return fmt.Errorf("%q is not host:port or a URL with a port", ep)
	}
	return nil
}

// quotas returns the tenants' quotas by name.
func (t TenancyConfig) quotas() map[string]tenancy.Quota {
	q := make(map[string]tenancy.Quota, len(t.Tenants))
	for _, tc := range t.Tenants {
		q[tc.Name] = tc.Quota
	}
	return q
}

// ledgerOptions returns the options the ledger opens with: the token key in TokenKeyFile,
// when set. A file that cannot be read or holds no key is an error naming the key.
func (t TenancyConfig) ledgerOptions() ([]tenancy.Option, error) {
	if t.TokenKeyFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(t.TokenKeyFile)
	if err != nil {
		return nil, fmt.Errorf("tenancy.tokenKeyFile: %w", err)
	}
	key, err := tenancy.ParseTokenKey(data)
	if err != nil {
		return nil, fmt.Errorf("tenancy.tokenKeyFile: %s %w", t.TokenKeyFile, err)
	}
	return []tenancy.Option{tenancy.WithTokenKey(key)}, nil
}

// validateTenancy checks the tenants, the ledger's store and every listener's tenant and methods.
func (c *Config) validateTenancy() error {
	seen := map[string]bool{}
	for i, t := range c.Tenancy.Tenants {
		key := fmt.Sprintf("tenancy.tenants[%d]", i)
		if err := tenancy.ValidTenantName(t.Name); err != nil {
			return fmt.Errorf("%s.name: %w", key, err)
		}
		if seen[t.Name] {
			return fmt.Errorf("%s.name: tenant %s is listed twice", key, t.Name)
		}
		seen[t.Name] = true
		if t.MaxVolumes < 0 || t.MaxBytes < 0 {
			return fmt.Errorf("%s: maxVolumes and maxBytes must not be negative (0 is unlimited)", key)
		}
	}
	if err := c.Tenancy.validateStore(); err != nil {
		return err
	}
	known := func(key, tenant string) error {
		if !seen[tenant] {
			return fmt.Errorf("%s: tenant %q is not in tenancy.tenants", key, tenant)
		}
		return nil
	}
	for i, l := range c.Listeners {
		key := fmt.Sprintf("listeners[%d]", i)
		if err := (auth.MethodAllowList{Patterns: l.Methods}).Validate(); err != nil {
			return fmt.Errorf("%s.methods: %w", key, err)
		}
		if l.Tenant != "" {
			if err := known(key+".tenant", l.Tenant); err != nil {
				return err
			}
		}
		someTenant := slices.ContainsFunc(l.Clients, func(r auth.ClientRule) bool { return r.Tenant != "" })
		for j, r := range l.Clients {
			ckey := fmt.Sprintf("%s.clients[%d].tenant", key, j)
			switch {
			case r.Tenant != "":
				if err := known(ckey, r.Tenant); err != nil {
					return err
				}
			case someTenant && l.Tenant == "":
				// One unconfined client on a tenants' listener would see every tenant's objects.
				return fmt.Errorf("%s: required: other clients of %s have tenants; give this one its own, or set %s.tenant", ckey, key, key)
			}
		}
	}
	return nil
}
