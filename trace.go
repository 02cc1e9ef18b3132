package latch

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
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
)

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(TracerName)
}

// startSpan starts a span of the guard's tracer beneath ctx's.
func (g *Guard) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return g.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
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
