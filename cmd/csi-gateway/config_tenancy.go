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
	"github.com/csi-gateway/csi-gateway/tlsconf"
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

// etcdTLS loads tenancy.store.etcd.tls, or returns nil without one. serve loads it with the
// other TLS files, before any backend, ledger or socket is created, so that a certificate
// that does not parse stops a start that has created nothing. openStore hands it to the
// store, which closes it.
func (t TenancyConfig) etcdTLS(log *slog.Logger) (*tlsconf.Client, error) {
	if e := t.Store.Etcd; e != nil && e.TLS != nil {
		return clientTLS("tenancy.store.etcd.tls", *e.TLS, log)
	}
	return nil, nil
}

// openStore opens the configured store, an etcd one with tc (etcdTLS's; closed by the store,
// on failure too), and says what it is, for the log. Its errors name the key at fault.
func (t TenancyConfig) openStore(tc *tlsconf.Client) (tenancy.Store, string, error) {
	if e := t.Store.Etcd; e != nil {
		store, err := tenancy.OpenEtcd(tenancy.EtcdConfig{Endpoints: e.Endpoints, Prefix: e.Prefix, LeaseTTL: e.LeaseTTL, RequestTimeout: e.RequestTimeout, TLS: tc})
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

// loadAndOpenStore is etcdTLS then openStore, for the commands that open a store and
// nothing else.
func (t TenancyConfig) loadAndOpenStore(log *slog.Logger) (tenancy.Store, string, error) {
	tc, err := t.etcdTLS(log)
	if err != nil {
		return nil, "", err
	}
	return t.openStore(tc)
}

// checkStore records the problems of tenancy.store (and its shorthand tenancy.ledger).
func (t TenancyConfig) checkStore(errs *configErrors) {
	s := t.Store
	switch {
	case t.Ledger != "" && (s.Bbolt != nil || s.Etcd != nil):
		errs.addf("tenancy.ledger", "is the shorthand of tenancy.store.bbolt.path; give tenancy.ledger or tenancy.store, not both")
	case s.Bbolt != nil && s.Etcd != nil:
		errs.addf("tenancy.store", "give one of bbolt and etcd")
	case len(t.Tenants) > 0 && !t.enabled():
		errs.addf("tenancy.store", "required with tenants: tenancy.store.bbolt.path (or its shorthand tenancy.ledger), a file such as /var/lib/csi-gateway/tenancy.db, for one central gateway; tenancy.store.etcd for replicas")
	case s.Bbolt != nil && s.Bbolt.Path == "":
		errs.addf("tenancy.store.bbolt.path", "required (a file, e.g. /var/lib/csi-gateway/tenancy.db)")
	case s.Etcd != nil:
		s.Etcd.check(errs)
	}
}

// check records the problems of tenancy.store.etcd.
func (e EtcdStoreConfig) check(errs *configErrors) {
	const key = "tenancy.store.etcd"
	if len(e.Endpoints) == 0 {
		errs.addf(key+".endpoints", "required (the etcd members' client URLs, e.g. https://etcd-0.etcd:2379)")
	}
	for i, ep := range e.Endpoints {
		if err := validEtcdEndpoint(ep, e.TLS != nil); err != nil {
			errs.addf(fmt.Sprintf("%s.endpoints[%d]", key, i), "%v", err)
		}
	}
	if e.TLS != nil {
		e.TLS.check(key+".tls", errs)
	}
	if e.Prefix != "" && !strings.HasSuffix(e.Prefix, "/") {
		errs.addf(key+".prefix", "%q must end in / (so that it is not the beginning of another gateway's prefix)", e.Prefix)
	}
	if e.LeaseTTL < 0 || (e.LeaseTTL > 0 && e.LeaseTTL < time.Second) {
		errs.addf(key+".leaseTTL", "%s is not a duration of 1s or more (default %s)", e.LeaseTTL, tenancy.DefaultEtcdLeaseTTL)
	}
	if e.RequestTimeout < 0 {
		errs.addf(key+".requestTimeout", "%s is negative (default %s)", e.RequestTimeout, tenancy.DefaultEtcdRequestTimeout)
	}
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

// tenantNames returns the names in tenancy.tenants, for listeners' references to be checked.
func (t TenancyConfig) tenantNames() map[string]bool {
	names := map[string]bool{}
	for _, tc := range t.Tenants {
		names[tc.Name] = true
	}
	return names
}

// check records the problems of the tenancy block: the tenants, the ledger's store and the
// token key file (read and parsed here, as the ledger will).
func (t TenancyConfig) check(errs *configErrors) {
	seen := map[string]bool{}
	for i, tc := range t.Tenants {
		key := fmt.Sprintf("tenancy.tenants[%d]", i)
		if err := tenancy.ValidTenantName(tc.Name); err != nil {
			errs.addf(key+".name", "%v", err)
		} else if seen[tc.Name] {
			errs.addf(key+".name", "tenant %s is listed twice", tc.Name)
		}
		seen[tc.Name] = true
		if tc.MaxVolumes < 0 || tc.MaxBytes < 0 {
			errs.addf(key, "maxVolumes and maxBytes must not be negative (0 is unlimited)")
		}
	}
	t.checkStore(errs)
	if _, err := t.ledgerOptions(); err != nil {
		errs.add(err)
	}
}

// checkTenants records the problems of listener key's tenant and its clients' tenants:
// each must be in tenancy.tenants, and on a listener where some clients have a tenant, every
// client is confined (by its own tenant or the listener's).
func (l ListenerConfig) checkTenants(key string, tenants map[string]bool, errs *configErrors) {
	known := func(key, tenant string) {
		if !tenants[tenant] {
			errs.addf(key, "tenant %q is not in tenancy.tenants", tenant)
		}
	}
	if l.Tenant != "" {
		known(key+".tenant", l.Tenant)
	}
	someTenant := slices.ContainsFunc(l.Clients, func(r auth.ClientRule) bool { return r.Tenant != "" })
	for j, r := range l.Clients {
		ckey := fmt.Sprintf("%s.clients[%d].tenant", key, j)
		switch {
		case r.Tenant != "":
			known(ckey, r.Tenant)
		case someTenant && l.Tenant == "":
			// One unconfined client on a tenants' listener would see every tenant's objects.
			errs.addf(ckey, "required: other clients of %s have tenants; give this one its own, or set %s.tenant", key, key)
		}
	}
}
