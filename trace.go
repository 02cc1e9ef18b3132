package latch

import (
	"context"
	"errors"
	"reflect"
	"slices"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// TracerName is the instrumentation scope of latch's spans.
const TracerName = "github.com/latchkit/latch"

// Span names: one span per call (SpanCall for Execute, SpanBegin and SpanFinish for the two
// halves of a call whose executor runs elsewhere), and beneath it one per pipeline step.
const (
	SpanCall    = "latch.call"
	SpanBegin   = "latch.begin"
	SpanFinish  = "latch.finish"
	SpanDecide  = "latch.decide"  // principal, normalize, authority and policy
	SpanApprove = "latch.approve" // the approval request (and, with Options.Wait, the wait)
	SpanReserve = "latch.reserve" // the reservation, spending the approval presented
	SpanExecute = "latch.execute" // the executor
	SpanRecord  = "latch.record"  // the outcome, its receipt and events
)

// Span attribute keys.
const (
	AttrAction     = attribute.Key("latch.action")
	AttrActionID   = attribute.Key("latch.action_id")
	AttrEffectKey  = attribute.Key("latch.effect_key")
	AttrAttempt    = attribute.Key("latch.attempt")
	AttrDecision   = attribute.Key("latch.decision")
	AttrReason     = attribute.Key("latch.reason")
	AttrApprovalID = attribute.Key("latch.approval_id")
	AttrResult     = attribute.Key("latch.result")
	// AttrExecutor is "remote" on the latch.execute span of a call begun with Begin: the span
	// runs from Begin's answer to the outcome's arrival.
	AttrExecutor = attribute.Key("latch.executor")
)

// newTracer is the tracer of Config.TracerProvider, or nil when the program configured none:
// then every call asks OpenTelemetry's global provider (spanTracer).
func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(TracerName)
}

// unsetGlobal is OpenTelemetry's global tracer provider as it stands before a program sets one:
// it makes spans that record nothing, but each still costs allocations (the span, the context
// that carries it, the options). It is recognized by its package, once; nil when the provider
// found at start-up is not that one (an imported package set one in its init), so that nothing
// is ever skipped by mistake.
var unsetGlobal = func() trace.TracerProvider {
	tp := otel.GetTracerProvider()
	if t := reflect.TypeOf(tp); t != nil && t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global" {
		return tp
	}
	return nil
}()

// noSpan is what startSpan returns when no span is made: ending it, or setting its attributes
// or status, does nothing.
var noSpan trace.Span = noop.Span{}

// spanTracer is the tracer a call's spans come from, or nil when no span is to be made: the
// program configured no Config.TracerProvider and has not set OpenTelemetry's global provider
// (docs/observability.md#traces). The global provider is read on every call (one atomic load),
// so one set after Open is used from the next call on.
func (g *Guard) spanTracer() trace.Tracer {
	if g.tracer != nil {
		return g.tracer
	}
	tp := otel.GetTracerProvider()
	if unsetGlobal != nil && tp == unsetGlobal {
		return nil
	}
	return tp.Tracer(TracerName)
}

// startSpan starts a span of the guard's tracer beneath ctx's; with no tracer it returns ctx as
// it is and noSpan, and allocates nothing.
func (g *Guard) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	t := g.spanTracer()
	if t == nil {
		return ctx, noSpan
	}
	// The copy keeps attrs from escaping, so that callers build them on the stack.
	return t.Start(ctx, name, trace.WithAttributes(slices.Clone(attrs)...))
}

// endSpan ends a span, marking it failed when err is not a refusal or an approval request: a
// refusal is the pipeline working, and its reason is an attribute.
func endSpan(span trace.Span, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if err != nil {
		if r := ReasonOf(err); r != "" {
			span.SetAttributes(AttrReason.String(r))
		} else if !isApprovalRequired(err) {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

func isApprovalRequired(err error) bool { return errors.Is(err, ErrApprovalRequired) }

// endCallSpan ends a call's span with its result.
func endCallSpan(span trace.Span, rc *Receipt, err error) {
	if span.IsRecording() {
		switch {
		case rc != nil:
			span.SetAttributes(AttrResult.String(rc.Result), AttrActionID.String(rc.ActionID))
		case isApprovalRequired(err):
			span.SetAttributes(AttrResult.String(ResultApprovalRequired))
		}
	}
	endSpan(span, err)
}
