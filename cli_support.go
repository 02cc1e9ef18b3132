package latch

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/latchkit/latch/policy"
)

// EvaluatePolicy decides call against p for principal without any store: exactly what
// Guard.Evaluate would answer (decision, reason, trace, action hash, effect key), for tools such
// as `latch eval` that must not open, let alone create, a store. env "" means the policy's
// environment, else "production". It writes nothing and reads nothing but its arguments.
func EvaluatePolicy(p *policy.Policy, call *Call, principal Principal, env string) (*Evaluation, error) {
	if p == nil {
		return nil, errors.New("latch: evaluate: no policy")
	}
	if env == "" {
		env = p.Environment
	}
	if env == "" {
		env = "production"
	}
	g := &Guard{cfg: Config{Now: time.Now}, env: env, log: slog.New(slog.DiscardHandler)}
	g.pol.Store(p)
	return g.Evaluate(WithPrincipal(context.Background(), principal), call)
}
