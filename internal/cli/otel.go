package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/latchkit/latch"
)

// otelShutdownTimeout bounds how long a stopping server waits for its last spans to be sent.
const otelShutdownTimeout = 5 * time.Second

// spanExport is where latch serve sends its spans, decided from --otel-endpoint and the standard
// OpenTelemetry variables (docs/observability.md#exporting-spans-from-latch-serve).
type spanExport struct {
	url     string // the flag's traces URL; "" = the exporter reads OTEL_EXPORTER_OTLP_* itself
	fromEnv bool   // the variables ask for export
}

// decideSpanExport reads --otel-endpoint (flag) and the environment: spans are exported over
// OTLP/HTTP when the flag gives a URL, or when OTEL_TRACES_EXPORTER is otlp, or when it is unset
// and an OTLP endpoint variable is set. Nothing is exported otherwise: a server that nobody
// asked to trace does not try to reach a collector on localhost. The result is nil for no
// export.
func (a *app) decideSpanExport(flag string) (*spanExport, error) {
	if strings.EqualFold(a.getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := a.getenv(k); p != "" {
			if p != "http/protobuf" && p != "http/json" {
				return nil, usagef("$%s=%s: latch serve exports spans over OTLP/HTTP only (http/protobuf or http/json)", k, p)
			}
			break // the traces variable wins over the general one
		}
	}
	if flag != "" {
		u, err := traceURL(flag)
		if err != nil {
			return nil, usagef("--otel-endpoint %q: %s", flag, err.Error())
		}
		return &spanExport{url: u}, nil
	}
	switch exp := a.getenv("OTEL_TRACES_EXPORTER"); exp {
	case "none":
		return nil, nil
	case "otlp":
		return &spanExport{fromEnv: true}, nil
	case "":
		if a.getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || a.getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" {
			return &spanExport{fromEnv: true}, nil
		}
		return nil, nil
	default:
		return nil, usagef("$OTEL_TRACES_EXPORTER=%s: latch serve exports spans with otlp (or none)", exp)
	}
}

// traceURL is the URL spans are posted to for --otel-endpoint: a collector's base URL
// (http://127.0.0.1:4318) gets the standard path /v1/traces; a URL with a path is used as given.
func traceURL(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("want an http:// or https:// URL, such as http://127.0.0.1:4318")
	case u.Host == "":
		return "", fmt.Errorf("no host")
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("a collector URL takes no query or fragment")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// tracerProvider starts the OpenTelemetry SDK exporting to e in batches, and returns the
// provider for latch.Config.TracerProvider and a shutdown that sends what is still queued.
// Export failures are logged, never fatal: tracing must not stop the guard.
func tracerProvider(ctx context.Context, e *spanExport, log *slog.Logger) (*sdktrace.TracerProvider, func(), error) {
	var opts []otlptracehttp.Option
	if e.url != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(e.url))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("span exporter: %w", err)
	}
	version := latch.Version
	// service.name is latch unless $OTEL_SERVICE_NAME or $OTEL_RESOURCE_ATTRIBUTES say otherwise.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", "latch"), attribute.String("service.version", version)),
		resource.WithFromEnv())
	if err != nil {
		if res == nil {
			return nil, nil, fmt.Errorf("span resource: %w", err)
		}
		log.Warn("latch serve: span resource", "err", err) // a partly unreadable $OTEL_RESOURCE_ATTRIBUTES
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("latch serve: span export", "err", err)
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), otelShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("latch serve: span export at shutdown", "err", err)
		}
	}, nil
}

// describe says where spans go, for the log line at start.
func (e *spanExport) describe() string {
	if e.url != "" {
		return e.url
	}
	return "$OTEL_EXPORTER_OTLP_* (default https://localhost:4318/v1/traces)"
}
