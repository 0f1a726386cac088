package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

// TenancyConfig makes the gateway a central one shared by tenants (clusters): callers are
// given a tenant by their listener (listeners[].tenant) or their client rule
// (listeners[].clients[].tenant), and each tenant sees only its own objects.
type TenancyConfig struct {
	// Ledger is the file that records which tenant owns which backend object (bbolt);
	// required when tenants are configured. Back it up with the backend's state.
	Ledger string `mapstructure:"ledger"`
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

// validateTenancy checks the tenants, the ledger and every listener's tenant and methods.
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
	if len(c.Tenancy.Tenants) > 0 && c.Tenancy.Ledger == "" {
		return fmt.Errorf("tenancy.ledger: required with tenants (a file, e.g. /var/lib/csi-gateway/tenancy.db)")
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
