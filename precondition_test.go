package latch_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// targetState is a precondition provider whose answer a test sets: the state of an invoice.
type targetState struct {
	mu    sync.Mutex
	state any
	err   error
	panic bool
	slow  bool
	asked int
}

func (s *targetState) set(state any, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state, s.err, s.panic, s.slow = state, err, false, false
}

func (s *targetState) read(ctx context.Context, req latch.PreconditionRequest) (any, error) {
	s.mu.Lock()
	s.asked++
	state, err, p, slow := s.state, s.err, s.panic, s.slow
	s.mu.Unlock()
	if p {
		panic("state store exploded")
	}
	if slow {
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond)
	}
	if req.Action != "billing.charge" || !strings.HasPrefix(req.Resource, "invoice:B-") || req.Principal.Agent == "" ||
		!strings.Contains(string(req.Arguments), `"invoice_id":"`+strings.TrimPrefix(req.Resource, "invoice:")+`"`) {
		return nil, errors.New("asked about the wrong call")
	}
	return state, err
}

func (s *targetState) questions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked
}

// refusedOnPrecondition checks a call refused on its precondition with reason: the error and
// its refusal, a denied receipt whose error holds the fingerprints and never the state, no
// effect record, and the presented approval (if any) still granted and unspent.
func refusedOnPrecondition(t *testing.T, e *env, rc *latch.Receipt, err error, reason, approvalID string) *latch.PreconditionError {
	t.Helper()
	var pe *latch.PreconditionError
	if !errors.As(err, &pe) || pe.Reason != reason || !errors.Is(err, latch.ErrDenied) || !errors.Is(err, latch.ErrPrecondition) {
		t.Fatalf("error = %v (%T), want a *PreconditionError %s matching ErrDenied and ErrPrecondition", err, err, reason)
	}
	if r := latch.RefusalOf(err); r.Kind != latch.KindDenied || string(r.Reason) != reason || r.ApprovalID != approvalID {
		t.Errorf("RefusalOf = %s %s approval %q, want denied %s approval %q", r.Kind, r.Reason, r.ApprovalID, reason, approvalID)
	}
	if rc == nil {
		t.Fatal("no receipt for a call refused on its precondition")
	}
	if rc.Result != receipt.Denied || rc.Decision != "deny" || rc.DecisionReason != reason || rc.Error != err.Error() {
		t.Errorf("receipt = %s %s %s %q; want denied deny %s with the call's error", rc.Result, rc.Decision, rc.DecisionReason, rc.Error, reason)
	}
	if strings.Contains(rc.Error, "paid") || strings.Contains(rc.Error, "open") {
		t.Errorf("receipt error %q holds the state itself; want its fingerprints only", rc.Error)
	}
	if eff, err := e.g.Store().Effect(t.Context(), "charge:B-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("effect after a precondition refusal = %+v, %v; want none (nothing reserved)", eff, err)
	}
	if approvalID != "" {
		if a, err := e.g.Store().Approval(t.Context(), approvalID); err != nil || a.Status != store.Granted || a.ConsumedBy != "" {
			t.Errorf("approval after a precondition refusal = %+v, %v; want granted and unspent", a, err)
		}
	}
	return pe
}

// evaluatedPayload is the policy_evaluated event of the call of rc.
func evaluatedPayload(t *testing.T, e *env, actionID string) map[string]any {
	t.Helper()
	evs, err := e.g.Store().Events(t.Context(), store.EventFilter{ActionID: actionID})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Kind == store.EventPolicyEvaluated {
			var m map[string]any
			if err := json.Unmarshal(ev.Payload, &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	t.Fatalf("no policy_evaluated event for %s", actionID)
	return nil
}

// requestApproval asks for the 500 charge of B-1 and grants it; it returns the request.
func requestApproval(t *testing.T, e *env, ctx context.Context, opts *latch.Options) string {
	t.Helper()
	call := chargeCall("B-1", 500)
	call.Options = opts
	_, err := e.g.Execute(ctx, call, func(context.Context, json.RawMessage) (any, error) {
		t.Error("an executor ran for a call that needs approval")
		return nil, nil
	})
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("approve call = %v, want approval required", err)
	}
	if _, err := e.g.Approve(t.Context(), ar.ApprovalID, "alice"); err != nil {
		t.Fatal(err)
	}
	return ar.ApprovalID
}

// TestPreconditionChangedRefusesApproval: an approval requested on state A is not spent on state
// B (precondition_changed, nothing reserved, the approval still granted), and is spent once the
// state is back to A; the fingerprint and its capture time are on the request.
func TestPreconditionChangedRefusesApproval(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := scopeEnvOn(t, backend, scopePolicy, latch.Config{})
			ctx := agent(t.Context())
			state := &targetState{state: map[string]any{"status": "open", "amount": 500}}
			opts := &latch.Options{Precondition: state.read}
			stateA, err := latch.PreconditionFingerprint(map[string]any{"amount": 500, "status": "open"})
			if err != nil {
				t.Fatal(err)
			}
			capturedAt := e.clock.Now()
			id := requestApproval(t, e, ctx, opts)
			a, err := e.g.Store().Approval(t.Context(), id)
			if err != nil || a.PreconditionHash != stateA || !a.PreconditionAt.Equal(capturedAt) {
				t.Fatalf("request = %+v, %v; want fingerprint %s captured at %v", a, err, stateA, capturedAt)
			}
			e.clock.Add(time.Minute)

			state.set(map[string]any{"status": "paid", "amount": 500}, nil)
			presented := latch.WithApproval(ctx, id)
			call := chargeCall("B-1", 500)
			call.Options = opts
			never := func(context.Context, json.RawMessage) (any, error) {
				t.Error("an executor ran for a call refused on its precondition")
				return nil, nil
			}
			rc, err := e.g.Execute(presented, call, never)
			pe := refusedOnPrecondition(t, e, rc, err, "precondition_changed", id)
			stateB, _ := latch.PreconditionFingerprint(map[string]any{"status": "paid", "amount": 500})
			if pe.Captured != stateA || pe.Current != stateB || !pe.CapturedAt.Equal(capturedAt) {
				t.Errorf("refusal = %+v; want captured %s at %v, current %s", pe, stateA, capturedAt, stateB)
			}
			if !strings.Contains(rc.Error, stateA) || !strings.Contains(rc.Error, stateB) {
				t.Errorf("receipt error %q does not name both fingerprints", rc.Error)
			}
			if p := evaluatedPayload(t, e, rc.ActionID); p["precondition"] != stateB || p["precondition_captured"] != stateA {
				t.Errorf("policy_evaluated = %v; want precondition %s, precondition_captured %s", p, stateB, stateA)
			}

			state.set(map[string]any{"amount": 500, "status": "open"}, nil)
			rc, err = e.g.Execute(presented, call, func(context.Context, json.RawMessage) (any, error) { return "charged", nil })
			if err != nil || rc.Result != receipt.Committed || rc.ApprovalID != id {
				t.Fatalf("presented on state A again = %+v, %v; want committed on the approval", rc, err)
			}
			if p := evaluatedPayload(t, e, rc.ActionID); p["precondition"] != stateA || p["precondition_captured"] != stateA {
				t.Errorf("policy_evaluated of the committed call = %v; want both fingerprints %s", p, stateA)
			}
			if a, _ := e.g.Store().Approval(t.Context(), id); a.Status != store.Consumed {
				t.Errorf("approval after the committed call is %s, want consumed", a.Status)
			}
			verifyChain(t, e.g)
		})
	}
}

// TestPreconditionMissingAndUnavailable: a fingerprint on one side only refuses the presented
// approval precondition_missing, either way round; a provider that fails, panics or outlives its
// timeout refuses it precondition_unavailable; in every case nothing is reserved and the
// approval stays granted. A provider that cannot be read when the request would be stored
// refuses the call, and no request is stored.
func TestPreconditionMissingAndUnavailable(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := scopeEnvOn(t, backend, scopePolicy, latch.Config{})
			ctx := agent(t.Context())
			never := func(context.Context, json.RawMessage) (any, error) {
				t.Error("an executor ran for a call refused on its precondition")
				return nil, nil
			}
			state := &targetState{state: map[string]any{"status": "open"}}
			opts := &latch.Options{Precondition: state.read, PreconditionTimeout: 200 * time.Millisecond}
			call := chargeCall("B-1", 500)
			call.Options = opts

			// Captured, then the target has no state.
			id := requestApproval(t, e, ctx, opts)
			presented := latch.WithApproval(ctx, id)
			state.set(nil, nil)
			rc, err := e.g.Execute(presented, call, never)
			refusedOnPrecondition(t, e, rc, err, "precondition_missing", id)
			// Captured, and no provider applies any more.
			bare := chargeCall("B-1", 500)
			rc, err = e.g.Execute(presented, bare, never)
			refusedOnPrecondition(t, e, rc, err, "precondition_missing", id)

			// The provider fails, panics, outlives its timeout.
			for name, set := range map[string]func(){
				"error":   func() { state.set(nil, errors.New("state store down")) },
				"panic":   func() { state.set(nil, nil); state.mu.Lock(); state.panic = true; state.mu.Unlock() },
				"timeout": func() { state.set(nil, nil); state.mu.Lock(); state.slow = true; state.mu.Unlock() },
				"garbage": func() { state.set(map[string]any{"ratio": 0.5}, nil) },
			} {
				set()
				rc, err = e.g.Execute(presented, call, never)
				pe := refusedOnPrecondition(t, e, rc, err, "precondition_unavailable", id)
				if pe.Err == nil {
					t.Errorf("%s: unavailable without a cause", name)
				}
			}

			// None captured (no provider when asked), and a state now.
			plain := chargeCall("B-1", 500)
			_, err = e.g.Execute(ctx, plain, never)
			var ar *latch.ApprovalRequiredError
			if !errors.As(err, &ar) {
				t.Fatalf("approve call = %v", err)
			}
			if _, err := e.g.Approve(t.Context(), ar.ApprovalID, "alice"); err != nil {
				t.Fatal(err)
			}
			state.set(map[string]any{"status": "open"}, nil)
			rc, err = e.g.Execute(latch.WithApproval(ctx, ar.ApprovalID), call, never)
			refusedOnPrecondition(t, e, rc, err, "precondition_missing", ar.ApprovalID)

			// The state cannot be read when the request would be stored: refused, nothing stored.
			before, err := e.g.Store().Approvals(t.Context(), store.ApprovalFilter{})
			if err != nil {
				t.Fatal(err)
			}
			state.set(nil, errors.New("state store down"))
			other := chargeCall("B-1", 501)
			other.Options = opts
			rc, err = e.g.Execute(ctx, other, never)
			refusedOnPrecondition(t, e, rc, err, "precondition_unavailable", "")
			after, _ := e.g.Store().Approvals(t.Context(), store.ApprovalFilter{})
			if len(after) != len(before) {
				t.Errorf("%d requests after an unreadable state, want %d (none stored)", len(after), len(before))
			}

			// A refused approval is refused for its own reason: the provider is not asked.
			n := state.questions()
			rc, err = e.g.Execute(latch.WithApproval(ctx, "apr_nosuch"), call, never)
			var am *latch.ApprovalMismatchError
			if !errors.As(err, &am) || am.Reason != "unknown" {
				t.Errorf("unknown approval = %v, want approval_unknown", err)
			}
			if state.questions() != n {
				t.Errorf("provider asked about an approval the reservation refuses")
			}
		})
	}
}

// TestPreconditionRecheckAlways: under recheck always a call the policy allows reads the state
// before reserving — refused precondition_unavailable when it cannot, its fingerprint recorded
// when it can — and under on_approval it is not asked.
func TestPreconditionRecheckAlways(t *testing.T) {
	t.Parallel()
	e := scopeEnvOn(t, "sqlite", scopePolicy, latch.Config{})
	ctx := agent(t.Context())
	state := &targetState{state: map[string]any{"status": "open"}}
	call := chargeCall("B-1", 50)
	call.Options = &latch.Options{Precondition: state.read}
	ran := func(context.Context, json.RawMessage) (any, error) { return "ok", nil }
	if _, err := e.g.Execute(ctx, call, ran); err != nil || state.questions() != 0 {
		t.Fatalf("allowed call under on_approval = %v, provider asked %d times; want it run without asking", err, state.questions())
	}

	call = chargeCall("B-2", 60)
	call.Options = &latch.Options{Precondition: state.read, Recheck: latch.RecheckAlways}
	state.set(nil, errors.New("state store down"))
	rc, err := e.g.Execute(ctx, call, func(context.Context, json.RawMessage) (any, error) {
		t.Error("ran without a readable state")
		return nil, nil
	})
	var pe *latch.PreconditionError
	if !errors.As(err, &pe) || pe.Reason != "precondition_unavailable" || rc == nil || rc.Result != receipt.Denied {
		t.Fatalf("allowed call, state unreadable = %+v, %v; want refused precondition_unavailable", rc, err)
	}
	state.set(map[string]any{"status": "open"}, nil)
	rc, err = e.g.Execute(ctx, call, ran)
	want, _ := latch.PreconditionFingerprint(map[string]any{"status": "open"})
	if err != nil || rc.Result != receipt.Committed {
		t.Fatalf("allowed call, state readable = %+v, %v", rc, err)
	}
	if p := evaluatedPayload(t, e, rc.ActionID); p["precondition"] != want {
		t.Errorf("policy_evaluated = %v, want precondition %s", p, want)
	}
}

// TestPreconditionFromPolicyURL: an action's precondition entry asks the state service it names
// (the call's action, arguments, resource and principal POSTed), and a changed answer refuses the
// presented approval.
func TestPreconditionFromPolicyURL(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	answer := `{"status":"open","amount":500}`
	var got map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		_ = json.Unmarshal(b, &got)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	doc := strings.Replace(scopePolicy, `    resource: "invoice:{invoice_id}"`,
		"    resource: \"invoice:{invoice_id}\"\n    precondition: { url: \""+srv.URL+"/state\", timeout: 1s }", 1)
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			e := scopeEnvOn(t, backend, doc, latch.Config{})
			ctx := agent(t.Context())
			id := requestApproval(t, e, ctx, nil)
			mu.Lock()
			if got["action"] != "billing.charge" || got["resource"] != "invoice:B-1" ||
				got["arguments"].(map[string]any)["invoice_id"] != "B-1" || got["principal"].(map[string]any)["agent"] == "" {
				t.Errorf("state service was sent %v", got)
			}
			answer = `{"status":"paid","amount":500}`
			mu.Unlock()
			never := func(context.Context, json.RawMessage) (any, error) { t.Error("ran"); return nil, nil }
			rc, err := e.g.Execute(latch.WithApproval(ctx, id), chargeCall("B-1", 500), never)
			refusedOnPrecondition(t, e, rc, err, "precondition_changed", id)
			mu.Lock()
			answer = "  {\"amount\": 500, \"status\": \"open\"}\n" // the same state, spelled otherwise
			mu.Unlock()
			if rc, err := e.g.Execute(latch.WithApproval(ctx, id), chargeCall("B-1", 500),
				func(context.Context, json.RawMessage) (any, error) { return "ok", nil }); err != nil || rc.Result != receipt.Committed {
				t.Fatalf("state back = %+v, %v; want committed", rc, err)
			}
		})
	}
}

// TestHTTPPrecondition: the precondition service's answer is the state only when it is a 2xx
// strict-JSON answer of at most 64 KiB; a redirect is not followed; a URL off this machine over
// plain http is refused when the provider is made.
func TestHTTPPrecondition(t *testing.T) {
	t.Parallel()
	if _, err := latch.HTTPPrecondition("http://state.example.com/v1"); err == nil {
		t.Error("HTTPPrecondition accepted plain http to a remote host")
	}
	handler := func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			_, _ = io.WriteString(w, `{"b":1,"a":[true,null]}`)
		case "/null":
			_, _ = io.WriteString(w, `null`)
		case "/big":
			_, _ = io.WriteString(w, `{"pad":"`+strings.Repeat("x", 64<<10)+`"}`)
		case "/dup":
			_, _ = io.WriteString(w, `{"a":1,"a":2}`)
		case "/500":
			w.WriteHeader(http.StatusInternalServerError)
		case "/redirect": // followed, it would answer /ok's state
			http.Redirect(w, r, "/ok", http.StatusFound)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(handler))
	t.Cleanup(srv.Close)
	ask := func(path string) (any, error) {
		fn, err := latch.HTTPPrecondition(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		return fn(t.Context(), latch.PreconditionRequest{Action: "a", Arguments: json.RawMessage(`{}`), Principal: latch.Principal{Agent: "bot"}})
	}
	state, err := ask("/ok")
	h, herr := latch.PreconditionFingerprint(state)
	want, _ := latch.PreconditionFingerprint(map[string]any{"a": []any{true, nil}, "b": 1})
	if err != nil || herr != nil || h != want {
		t.Errorf("/ok = %s, %v, %v; want the fingerprint of the same state, %s", h, err, herr, want)
	}
	if state, err := ask("/null"); err != nil {
		t.Errorf("/null = %v", err)
	} else if h, _ := latch.PreconditionFingerprint(state); h != "" {
		t.Errorf("/null fingerprint = %q, want none", h)
	}
	for _, path := range []string{"/big", "/dup", "/500", "/redirect"} {
		if _, err := ask(path); err == nil || strings.Contains(err.Error(), srv.URL) {
			t.Errorf("%s = %v; want an error that does not name the URL", path, err)
		}
	}
}

// TestPreconditionWhileWaiting: a call that waits for its approval (Options.Wait) reads the
// state again once the approval is granted: a state changed while it waited refuses it
// precondition_changed, and the approval stays granted.
func TestPreconditionWhileWaiting(t *testing.T) {
	t.Parallel()
	e := scopeEnvOn(t, "sqlite", scopePolicy, latch.Config{})
	ctx := agent(t.Context())
	state := &targetState{state: map[string]any{"status": "open"}}
	call := chargeCall("B-1", 500)
	call.Options = &latch.Options{Precondition: state.read, Wait: true}
	type result struct {
		rc  *latch.Receipt
		err error
	}
	done := make(chan result, 1)
	go func() {
		rc, err := e.g.Execute(ctx, call, func(context.Context, json.RawMessage) (any, error) {
			t.Error("ran on a changed state")
			return nil, nil
		})
		done <- result{rc, err}
	}()
	var id string
	for deadline := time.Now().Add(10 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if l, err := e.g.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Pending}); err == nil && len(l) == 1 {
			id = l[0].ID
		}
	}
	if id == "" {
		t.Fatal("no request was stored")
	}
	state.set(map[string]any{"status": "paid"}, nil)
	if _, err := e.g.Approve(t.Context(), id, "alice"); err != nil {
		t.Fatal(err)
	}
	r := <-done
	refusedOnPrecondition(t, e, r.rc, r.err, "precondition_changed", id)
}
