package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// otlpTracesPath is the standard path of the OTLP/HTTP traces endpoint.
const otlpTracesPath = "/v1/traces"

// newExporter builds the exporter kind names; nil for none. The OTLP exporters read the
// OTEL_EXPORTER_OTLP_* variables themselves; the options given here override them.
func newExporter(ctx context.Context, kind string, cfg Config, w io.Writer) (sdktrace.SpanExporter, error) {
	var e sdktrace.SpanExporter
	var err error
	switch kind {
	case ExporterNone:
		return nil, nil
	case ExporterStdout:
		e, err = stdouttrace.New(stdouttrace.WithWriter(w))
	case ExporterOTLP, ExporterOTLPHTTP:
		ep, perr := parseEndpoint(cfg)
		if perr != nil {
			return nil, perr
		}
		if kind == ExporterOTLP {
			e, err = otlptracegrpc.New(ctx, ep.grpcOptions(cfg.Insecure)...)
		} else {
			e, err = otlptracehttp.New(ctx, ep.httpOptions(cfg.Insecure)...)
		}
	default:
		return nil, fmt.Errorf("tracing.exporter: %q is not none, otlp, otlphttp, stdout or console", kind)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing.exporter: %s: %w", kind, err)
	}
	return e, nil
}

// grpcOptions are the otlp exporter's options for ep.
func (ep endpoint) grpcOptions(insecure bool) []otlptracegrpc.Option {
	var opts []otlptracegrpc.Option
	switch {
	case ep.url != nil:
		opts = append(opts, otlptracegrpc.WithEndpointURL(ep.url.String()))
	case ep.hostPort != "":
		opts = append(opts, otlptracegrpc.WithEndpoint(ep.hostPort))
	}
	if insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	return opts
}

// httpOptions are the otlphttp exporter's options for ep: a URL without a path is a base
// URL, as in OTEL_EXPORTER_OTLP_ENDPOINT, to which the traces' path is added.
func (ep endpoint) httpOptions(insecure bool) []otlptracehttp.Option {
	var opts []otlptracehttp.Option
	switch {
	case ep.url != nil:
		u := *ep.url
		if u.Path == "" || u.Path == "/" {
			u.Path = otlpTracesPath
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	case ep.hostPort != "":
		opts = append(opts, otlptracehttp.WithEndpoint(ep.hostPort))
	}
	if insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	return opts
}

// endpoint is a checked Config.Endpoint: a URL or host:port, or neither when it is empty.
type endpoint struct {
	url      *url.URL
	hostPort string
}

// parseEndpoint checks Config.Endpoint. A URL is never repeated in an error when it has
// userinfo, which would be a credential.
func parseEndpoint(cfg Config) (endpoint, error) {
	raw := strings.TrimSpace(cfg.Endpoint)
	if raw == "" {
		return endpoint{}, nil
	}
	if !strings.Contains(raw, "://") {
		host, port, err := net.SplitHostPort(raw)
		if err != nil || host == "" || port == "" {
			return endpoint{}, fmt.Errorf("tracing.endpoint: %q is neither host:port nor a URL (http://host:port or https://host:port)", raw)
		}
		return endpoint{hostPort: raw}, nil
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil && strings.Contains(raw, "@"):
		return endpoint{}, errors.New("tracing.endpoint: not a valid URL")
	case err != nil:
		return endpoint{}, fmt.Errorf("tracing.endpoint: not a valid URL: %v", errors.Unwrap(err))
	case u.Scheme != "http" && u.Scheme != "https":
		return endpoint{}, fmt.Errorf("tracing.endpoint: scheme %q is not supported; use http:// or https://", u.Scheme)
	case u.User != nil:
		return endpoint{}, fmt.Errorf("tracing.endpoint: %s://%s: credentials do not belong in the URL; put them in OTEL_EXPORTER_OTLP_HEADERS", u.Scheme, u.Host)
	case u.Hostname() == "":
		return endpoint{}, fmt.Errorf("tracing.endpoint: %q has no host", raw)
	case u.Scheme == "https" && cfg.Insecure:
		return endpoint{}, fmt.Errorf("tracing.insecure: true contradicts the https:// of tracing.endpoint %q; use http:// for plaintext", raw)
	}
	return endpoint{url: u}, nil
}
