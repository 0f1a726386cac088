package main

import (
	"fmt"
	"maps"
	"net"
	"os"
	"slices"

	"github.com/csi-gateway/csi-gateway/auth"
	grpcbackend "github.com/csi-gateway/csi-gateway/backends/grpc"
	"github.com/csi-gateway/csi-gateway/proxy"
	"github.com/csi-gateway/csi-gateway/tracing"
)

// Validate checks the whole configuration before anything is opened, created or dialled,
// and reports every problem it finds, one per line, each behind its key path.
func (c *Config) Validate() error {
	var errs configErrors
	c.check(&errs)
	return errs.err()
}

// check records every problem of c in errs, section by section in the order of Config's
// fields (see configErrors). It reads the files the configuration names (TLS material,
// credentials, the token key) but creates nothing.
func (c *Config) check(errs *configErrors) {
	tenants := c.Tenancy.tenantNames()
	for i, l := range c.Listeners {
		l.check(fmt.Sprintf("listeners[%d]", i), tenants, errs)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Backends)) {
		c.Backends[name].check("backends."+name, name, errs)
	}
	if len(c.Routes) == 0 {
		errs.addf("routes", "empty; route methods to backends, e.g. {methods: [\"*\"], backend: NAME}")
	}
	errs.add(proxy.CheckRoutes(c.Routes, func(name string) bool { _, ok := c.Backends[name]; return ok }))
	if c.Shutdown.Grace < 0 {
		errs.addf("shutdown.grace", "must not be negative")
	}
	if c.Admin.Listen != "" {
		if _, port, err := net.SplitHostPort(c.Admin.Listen); err != nil || port == "" {
			errs.addf("admin.listen", "%q is not host:port, e.g. 127.0.0.1:9808", c.Admin.Listen)
		}
	}
	errs.add(tracing.CheckExporter(c.Tracing.Exporter))
	if c.Tracing.SampleRatio > 1 {
		errs.addf("tracing.sampleRatio", "%v is not between 0 and 1", c.Tracing.SampleRatio)
	}
	if _, err := proxy.NewTimeouts(c.Timeouts); err != nil {
		errs.add(err)
	}
	errs.add(c.Limits.Validate(c.Transport))
	c.Tenancy.check(errs)
	for i, d := range c.DescriptorSets {
		if _, err := d.load(fmt.Sprintf("descriptorSets[%d]", i)); err != nil {
			errs.add(err)
		}
	}
}

// check records the problems of listener key: its endpoint, its security against the
// endpoint's scheme (tls, clients, insecure, allowUIDs), its methods and tenants.
func (l ListenerConfig) check(key string, tenants map[string]bool, errs *configErrors) {
	if err := (auth.MethodAllowList{Patterns: l.Methods}).Validate(); err != nil {
		errs.addf(key+".methods", "%v", err)
	}
	l.checkTenants(key, tenants, errs)
	if l.Endpoint.Scheme == "" {
		errs.addf(key+".endpoint", "required: unix:///absolute/path.sock or tcp://host:port")
		return
	}
	if l.Endpoint.Scheme == "unix" {
		switch {
		case l.TLS != nil:
			errs.addf(key+".tls", "only for tcp:// endpoints; a Unix socket is guarded by socketMode and allowUIDs/allowGIDs")
		case len(l.Clients) > 0:
			errs.addf(key+".clients", "only for tcp:// endpoints with tls; use allowUIDs/allowGIDs on a Unix socket")
		case l.Insecure:
			errs.addf(key+".insecure", "only for tcp:// endpoints")
		}
		return
	}
	if len(l.AllowUIDs) > 0 || len(l.AllowGIDs) > 0 {
		errs.addf(key+".allowUIDs", "only for unix:// endpoints; list TCP callers in clients")
	}
	if l.Insecure {
		if l.TLS != nil || len(l.Clients) > 0 {
			errs.addf(key+".insecure", "true turns TLS off; remove tls and clients, or insecure")
		}
		return
	}
	if l.TLS == nil {
		errs.addf(key+".tls", "required on %s (cert, key, clientCA); plaintext TCP needs insecure: true", l.Endpoint)
	} else {
		for _, f := range []struct{ name, path string }{{"cert", l.TLS.Cert}, {"key", l.TLS.Key}, {"clientCA", l.TLS.ClientCA}} {
			if f.path == "" {
				errs.addf(key+".tls."+f.name, "required (a PEM file)")
			}
			checkReadable(key+".tls."+f.name, f.path, errs)
		}
	}
	if len(l.Clients) == 0 {
		errs.addf(key+".clients", "required with tls: list who may call, e.g. [{uri: \"spiffe://example.org/ns/kube-system/sa/csi-provisioner\"}]")
	}
	for j, c := range l.Clients {
		if err := c.Validate(); err != nil {
			errs.addf(fmt.Sprintf("%s.clients[%d]", key, j), "%v", err)
		}
	}
}

// check records the problems of backend key (named name): its type and the keys of that
// type, its URLs or targets, retries, breaker and budget, TLS and credentials files.
func (b BackendConfig) check(key, name string, errs *configErrors) {
	switch b.Type {
	case "grpc":
		if b.Target == "" && len(b.Targets) == 0 {
			errs.addf(key+".target", "required for a grpc backend (unix:///path/to/driver.sock), or targets: [...] for failover")
		} else {
			errs.addEach("", grpcbackend.Config{Target: b.Target, Targets: b.Targets}.Validate(name, b.TLS != nil))
		}
		if _, err := b.CircuitBreaker.WithDefaults(); err != nil {
			errs.addEach(key+".circuitBreaker.", err)
		}
	case "rest":
		switch b.Protocol {
		case "", "connect":
			if !b.CSP.isZero() {
				errs.addf(key+".csp", "only with protocol: csp")
			}
			errs.addEach(key+".", b.restConfig().Validate())
		case "csp":
			if b.AllowSecretsOverPlaintextHTTP {
				errs.addf(key+".allowSecretsOverPlaintextHTTP", "only with protocol: connect; a csp backend has csp.plaintextHTTP")
			}
			validateCSP(key, b, errs)
		default:
			errs.addf(key+".protocol", "%q is not connect or csp", b.Protocol)
		}
	case "embedded":
		if b.TLS != nil {
			errs.addf(key+".tls", "only for grpc and rest backends")
		}
		if err := b.embeddedConfig().Validate(); err != nil {
			errs.addf(key, "%v", err)
		}
	case "":
		errs.addf(key+".type", "required: grpc, rest or embedded")
	default:
		errs.addf(key+".type", "%q is not one of grpc, rest, embedded", b.Type)
	}
	if b.CSIVersion != "" && b.Type != "grpc" {
		errs.addf(key+".csiVersion", "only for grpc backends: rest and embedded backends speak CSI v1, and v0 callers are translated for them")
	}
	if b.Auth != (BackendAuthConfig{}) && b.Type != "rest" {
		errs.addf(key+".auth", "only for rest backends")
	}
	if b.AllowSecretsOverPlaintextHTTP && b.Type != "rest" {
		errs.addf(key+".allowSecretsOverPlaintextHTTP", "only for rest backends")
	}
	for _, f := range []struct{ name, path string }{{"bearerTokenFile", b.Auth.BearerTokenFile}, {"usernameFile", b.Auth.UsernameFile}, {"passwordFile", b.Auth.PasswordFile}} {
		checkReadable(key+".auth."+f.name, f.path, errs)
	}
	if b.TLS != nil && b.Type != "embedded" {
		b.TLS.check(key+".tls", errs)
	}
}

// check records the problems of the tls keys of something the gateway dials (a backend,
// etcd), key being their path.
func (t BackendTLSConfig) check(key string, errs *configErrors) {
	if t.CA == "" {
		errs.addf(key+".ca", "required (a PEM file: the CA bundle that signed the server's certificate)")
	}
	if (t.Cert == "") != (t.Key == "") {
		errs.addf(key+".cert", "cert and key go together (the gateway's client certificate and its key); give both or neither")
	}
	checkReadable(key+".ca", t.CA, errs)
	checkReadable(key+".cert", t.Cert, errs)
	checkReadable(key+".key", t.Key, errs)
}

// checkReadable records an error for key when path (not empty) cannot be read, as the
// component that loads it later would find: "open /etc/x: no such file or directory".
func checkReadable(key, path string, errs *configErrors) {
	if path == "" {
		return
	}
	if _, err := os.ReadFile(path); err != nil {
		errs.addf(key, "%v", err)
	}
}
