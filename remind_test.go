package latch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// remindPolicy reminds the leads of an unanswered refund after 10 minutes, and escalates it to
// the heads and to erin after 30; a request lives an hour.
const remindPolicy = `
schema: latch.policy/v1
approvers:
  roles:
    leads: [alice, bob]
    heads: [dana]
actions:
  refund.issue:
    effect: "refund:{id}"
    decision: approve
    approval_ttl: 1h
    approvers:
      roles: [leads]
      required: 2
      remind_after: 10m
      escalate_after: 30m
      escalate_to: {roles: [heads], people: [erin]}
`

// Offsets of the sweeping processes' clocks from the request's creation: past remind_after and
// before escalate_after, then past escalate_after.
const (
	remindOffset   = 15 * time.Minute
	escalateOffset = 45 * time.Minute
)

var remindSecret = []byte("remind-test-secret")

// The helper process of TestRemindEscalateProcesses: a guard whose clock runs remindOffset
// ahead until the file Escalate exists, then escalateOffset ahead, that sweeps the store until
// the file Stop exists, with a notifier posting to Notify. It prints what each pass reminded
// and escalated ("reminded ID", "escalated ID") and how many passes it made in each phase.
const remindChildEnv = "LATCH_TEST_REMIND_CHILD"

func init() { children[remindChildEnv] = remindChild }

func remindChild(spec string) error {
	var c struct{ Store, Notify, Start, Escalate, Stop string }
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		return err
	}
	ctx := context.Background()
	p, err := policy.Parse("latch.yaml", []byte(remindPolicy))
	if err != nil {
		return err
	}
	n, err := notify.New(&notify.Config{URLs: []string{c.Notify}, Secret: remindSecret})
	if err != nil {
		return err
	}
	var offset atomic.Int64
	offset.Store(int64(remindOffset))
	g, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: c.Store, Sinks: []latch.Sink{n},
		Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
	if err != nil {
		return err
	}
	exists := func(f string) bool { _, err := os.Stat(f); return err == nil }
	for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait) && !exists(c.Start); {
		time.Sleep(2 * time.Millisecond)
	}
	out := bufio.NewWriter(os.Stdout)
	passes := map[string]int{}
	for !exists(c.Stop) {
		phase := "remind"
		if exists(c.Escalate) {
			phase = "escalate"
			offset.Store(int64(escalateOffset))
		}
		rep, err := g.Sweep(ctx)
		if err != nil {
			return err
		}
		for _, id := range rep.Reminded {
			fmt.Fprintf(out, "reminded %s\n", id)
		}
		for _, id := range rep.Escalated {
			fmt.Fprintf(out, "escalated %s\n", id)
		}
		passes[phase]++
	}
	fmt.Fprintf(out, "passes %d %d\n", passes["remind"], passes["escalate"])
	time.Sleep(300 * time.Millisecond) // the alerts queued reach the receiver before Close drops them
	err = errors.Join(out.Flush(), g.Close(), n.Close())
	return err
}

// alertReceiver is a real HTTP server that verifies each alert's signature and keeps it.
type alertReceiver struct {
	mu     sync.Mutex
	alerts []notify.Alert
	bad    []error
}

func newAlertReceiver(t *testing.T) (*alertReceiver, string) {
	t.Helper()
	r := &alertReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		err := notify.Verify(remindSecret, req.Header.Get(notify.HeaderTimestamp), req.Header.Get(notify.HeaderSignature), body, time.Now(), 5*time.Minute)
		var a notify.Alert
		if err == nil {
			err = json.Unmarshal(body, &a)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.bad = append(r.bad, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		r.alerts = append(r.alerts, a)
	}))
	t.Cleanup(srv.Close)
	return r, srv.URL
}

// askRefund makes a call of refund.issue as agent bot and returns the approval request it left.
func askRefund(t *testing.T, g *latch.Guard, id string) string {
	t.Helper()
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"})
	_, err := g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: json.RawMessage(`{"id":"` + id + `"}`)},
		func(context.Context, json.RawMessage) (any, error) { return "refunded", nil })
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("refund %s = %v, want an approval request", id, err)
	}
	return ar.ApprovalID
}

// TestRemindEscalateProcesses: two OS processes sweep one store, each with a notifier. A
// request unanswered past remind_after is reminded about exactly once, and past escalate_after
// escalated exactly once, however the two interleave: one event of each kind in the store, one
// alert of each kind at the receiver, each named by exactly one process's sweep.
func TestRemindEscalateProcesses(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			url := testdb.URL(t, backend, "latch_remind")
			p, err := policy.Parse("latch.yaml", []byte(remindPolicy))
			if err != nil {
				t.Fatal(err)
			}
			g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: url}) // migrates first
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			const requests = 3
			ids := map[string]bool{}
			for i := range requests {
				ids[askRefund(t, g, fmt.Sprintf("r%d", i))] = true
			}
			recv, recvURL := newAlertReceiver(t)
			dir := t.TempDir()
			start, esc, stop := filepath.Join(dir, "start"), filepath.Join(dir, "escalate"), filepath.Join(dir, "stop")
			spec := map[string]any{"Store": url, "Notify": recvURL, "Start": start, "Escalate": esc, "Stop": stop}
			cmds, outs := startChildren(t, remindChildEnv, 2, func(int) any { return spec })
			for i, f := range []string{start, esc, stop} {
				if i > 0 {
					time.Sleep(1500 * time.Millisecond) // both processes sweep in each phase
				}
				if err := os.WriteFile(f, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			reminded, escalated := map[string]int{}, map[string]int{}
			for i, lines := range waitChildren(t, cmds, outs) {
				for _, line := range lines {
					f := strings.Fields(line)
					switch {
					case len(f) == 2 && f[0] == "reminded":
						reminded[f[1]]++
					case len(f) == 2 && f[0] == "escalated":
						escalated[f[1]]++
					case len(f) == 3 && f[0] == "passes":
						if f[1] == "0" || f[2] == "0" {
							t.Errorf("process %d swept %s times before the escalation phase and %s after: want both phases swept", i, f[1], f[2])
						}
					default:
						t.Errorf("process %d: %q", i, line)
					}
				}
			}
			for id := range ids {
				if reminded[id] != 1 || escalated[id] != 1 {
					t.Errorf("request %s: reminded %d times, escalated %d times by the sweeps; want once each", id, reminded[id], escalated[id])
				}
				evs, err := g.Store().Events(t.Context(), store.EventFilter{ApprovalID: id})
				if err != nil {
					t.Fatal(err)
				}
				var kinds []string
				for _, e := range evs {
					if e.Kind == store.EventApprovalReminded || e.Kind == store.EventApprovalEscalated {
						kinds = append(kinds, e.Kind)
					}
				}
				if strings.Join(kinds, " ") != "approval_reminded approval_escalated" {
					t.Errorf("request %s: nudge events %v, want one reminder then one escalation", id, kinds)
				}
			}
			if len(reminded) != requests || len(escalated) != requests {
				t.Errorf("reminded %v, escalated %v: want each of the %d requests", reminded, escalated, requests)
			}
			recv.mu.Lock()
			defer recv.mu.Unlock()
			if len(recv.bad) > 0 {
				t.Fatalf("receiver refused alerts: %v", recv.bad)
			}
			got := map[string]int{}
			for _, a := range recv.alerts {
				got[a.Alert+" "+a.ApprovalID]++
				if a.Action != "refund.issue" || !strings.Contains(a.Text, "refund.issue") {
					t.Errorf("alert %+v: want it to name the action refund.issue", a)
				}
				if a.Alert == notify.KindApprovalEscalated && !strings.Contains(a.Text, "(0 of 2 granted); escalated to role heads, erin, who may now answer it") {
					t.Errorf("escalation alert text %q: want it to name role heads and erin", a.Text)
				}
			}
			for id := range ids {
				if got[notify.KindApprovalReminded+" "+id] != 1 || got[notify.KindApprovalEscalated+" "+id] != 1 {
					t.Errorf("alerts of %s: %v, want one reminder and one escalation", id, got)
				}
			}
			if len(recv.alerts) != 2*requests {
				t.Errorf("receiver got %d alerts, want %d", len(recv.alerts), 2*requests)
			}
			verifyChain(t, g)
		})
	}
}

// TestEscalatedApprovers: before escalate_after only the leads may answer a refund; from then
// on the heads and erin may too. The escalation changes who may answer, never how many must
// grant, and the requester is never among them, even when escalate_to names it.
func TestEscalatedApprovers(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			src := strings.Replace(remindPolicy, "people: [erin]", "people: [erin, bot]", 1)
			p, err := policy.Parse("latch.yaml", []byte(src))
			if err != nil {
				t.Fatal(err)
			}
			var offset atomic.Int64
			g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: testdb.URL(t, backend, "latch_escalated"),
				Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			id := askRefund(t, g, "e1")
			refused := func(who, reason string) {
				t.Helper()
				_, err := g.Approve(t.Context(), id, who)
				var ae *store.AnswerError
				if !errors.As(err, &ae) || ae.Reason != reason {
					t.Errorf("Approve by %s at +%v = %v, want %s", who, time.Duration(offset.Load()), err, reason)
				}
			}
			offset.Store(int64(29 * time.Minute))
			refused("dana", store.ReasonNotEntitled)
			refused("erin", store.ReasonNotEntitled)
			if a, err := g.Approve(t.Context(), id, "alice"); err != nil || a.Status != store.Pending {
				t.Fatalf("Approve by alice = %+v, %v; want pending, 1 of 2", a, err)
			}
			offset.Store(int64(30 * time.Minute))
			refused("bot", store.ReasonSelfApproval) // escalate_to names the requester: still refused
			refused("mallory", store.ReasonNotEntitled)
			if a, err := g.Approve(t.Context(), id, "ERIN"); err != nil || a.Status != store.Granted {
				t.Fatalf("Approve by ERIN after escalate_after = %+v, %v; want granted (alice and erin: 2 of 2)", a, err)
			}

			// One grant of the two required stays one, whoever gives it.
			id2 := askRefund(t, g, "e2")
			offset.Store(int64(61 * time.Minute)) // 31 minutes after id2 was asked for
			if a, err := g.Approve(t.Context(), id2, "dana"); err != nil || a.Status != store.Pending {
				t.Fatalf("Approve by dana = %+v, %v; want pending: required stays 2", a, err)
			}
		})
	}
}
