package tracing

import (
	"context"
	"crypto/rand"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// newResource describes the process for every span, from weakest to strongest: the defaults
// (service.name csi-gateway, a random service.instance.id), what the host and the SDK tell
// (host.name, process.pid, telemetry.sdk.*), OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME,
// and last what cfg says explicitly. A malformed OTEL_RESOURCE_ATTRIBUTES is an error.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	var explicit []attribute.KeyValue
	if cfg.ServiceName != "" {
		explicit = append(explicit, semconv.ServiceName(cfg.ServiceName))
	}
	if cfg.ServiceVersion != "" {
		explicit = append(explicit, semconv.ServiceVersion(cfg.ServiceVersion))
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(DefaultServiceName), semconv.ServiceInstanceID(instanceID())),
		resource.WithHost(),
		resource.WithProcessPID(),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
		resource.WithAttributes(explicit...),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: describing the service (check OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME): %w", err)
	}
	return res, nil
}

// instanceID returns a random UUID (version 4), the form the semantic conventions recommend
// for service.instance.id: unique per process, also when a restarted container gets the same
// host name and PID.
func instanceID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return an error)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
