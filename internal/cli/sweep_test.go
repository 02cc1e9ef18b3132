package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/store"
)

const sweepPolicy = `schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    lease: 1s
    approval_ttl: 1s
    rules:
      - when: { amount_lte: 50000 }
        decision: allow
      - decision: approve
`

// TestSweepProcesses: three `latch serve --sweep` processes on one store (SQLite, Postgres)
// write each lapsed lease ambiguous once and each expired approval request expired once, with
// one event each, whichever process gets there first.
func TestSweepProcesses(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			latchBin, policyPath := latchDir(t, sweepPolicy)
			url := testdb.URL(t, backend, "cli_sweep")
			g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: policyPath, StoreURL: url})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"})
			const leases, approvals = 40, 10
			for i := range leases {
				// Begun, never finished: the worker crashed.
				if _, err := g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: fmt.Appendf(nil, `{"invoice_id":"inv_%d","amount":100}`, i)}); err != nil {
					t.Fatal(err)
				}
			}
			for i := range approvals {
				_, err := g.Begin(ctx, &latch.Call{Action: "billing.charge", Arguments: fmt.Appendf(nil, `{"invoice_id":"big_%d","amount":90000}`, i)})
				if !errorsIsApproval(err) {
					t.Fatalf("big charge = %v, want approval required", err)
				}
			}
			time.Sleep(1100 * time.Millisecond) // every lease and request lapses

			type proc struct {
				cmd    *exec.Cmd
				stderr *bytes.Buffer
				addr   string
			}
			var procs []proc
			for range 3 {
				addr := freeAddr(t)
				cmd := exec.Command(latchBin, "--policy", policyPath, "--store", url, "serve", "--listen", addr, "--sweep", "20ms")
				cmd.Env = cleanEnv()
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				procs = append(procs, proc{cmd, &stderr, addr})
			}
			for _, p := range procs { // started together, to race
				if err := p.cmd.Start(); err != nil {
					t.Fatal(err)
				}
			}
			defer func() {
				for _, p := range procs {
					_ = p.cmd.Process.Kill()
				}
			}()
			// Each is ready (its signal handling in place) before the SIGTERM below: the others
			// may sweep everything while one is still starting.
			for i, p := range procs {
				if !ready("http://" + p.addr) {
					t.Fatalf("serve %d never became ready", i)
				}
			}

			deadline := time.Now().Add(30 * time.Second)
			for {
				ex, err1 := g.Store().Effects(t.Context(), store.EffectFilter{State: store.Executing})
				pe, err2 := g.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Pending})
				if err1 == nil && err2 == nil && len(ex) == 0 && len(pe) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("not swept after 30s: %d executing, %d pending (%v %v)", len(ex), len(pe), err1, err2)
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(200 * time.Millisecond) // a few more sweeps, which must find nothing
			swept := regexp.MustCompile(`latch serve: swept.*lapsed_leases=(\d+) expired_approvals=(\d+)`)
			lapsed, expired := 0, 0
			for i, p := range procs {
				if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if err := p.cmd.Wait(); err != nil {
					t.Fatalf("serve %d: %v\n%s", i, err, p.stderr)
				}
				l, e := 0, 0
				for _, m := range swept.FindAllStringSubmatch(p.stderr.String(), -1) {
					a, _ := strconv.Atoi(m[1])
					b, _ := strconv.Atoi(m[2])
					l, e = l+a, e+b
				}
				t.Logf("serve %d swept %d leases, %d approvals", i, l, e)
				lapsed, expired = lapsed+l, expired+e
			}
			if lapsed != leases || expired != approvals {
				t.Errorf("processes swept %d leases and %d approvals in all, want %d and %d (each once)", lapsed, expired, leases, approvals)
			}

			evs, err := g.Store().Events(context.Background(), store.EventFilter{})
			if err != nil {
				t.Fatal(err)
			}
			perKey, perApproval := map[string]int{}, map[string]int{}
			for _, e := range evs {
				var p struct{ By string }
				_ = json.Unmarshal(e.Payload, &p)
				switch {
				case e.Kind == store.EventExecutionAmbiguous && p.By == "sweeper":
					perKey[e.EffectKey]++
				case e.Kind == store.EventApprovalInvalidated && p.By == "sweeper":
					perApproval[e.ApprovalID]++
				}
			}
			if len(perKey) != leases || len(perApproval) != approvals {
				t.Errorf("sweep events for %d keys and %d approvals, want %d and %d", len(perKey), len(perApproval), leases, approvals)
			}
			for k, n := range perKey {
				if n != 1 {
					t.Errorf("%s: %d lapse events, want 1", k, n)
				}
			}
			for id, n := range perApproval {
				if n != 1 {
					t.Errorf("%s: %d expiry events, want 1", id, n)
				}
			}
			amb, err := g.Store().Effects(t.Context(), store.EffectFilter{State: store.Ambiguous})
			if err != nil || len(amb) != leases {
				t.Errorf("ambiguous effects = %d (%v), want %d", len(amb), err, leases)
			}
			exp, err := g.Store().Approvals(t.Context(), store.ApprovalFilter{Status: store.Expired})
			if err != nil || len(exp) != approvals {
				t.Errorf("expired approvals = %d (%v), want %d", len(exp), err, approvals)
			}
		})
	}
}

func errorsIsApproval(err error) bool { return errors.Is(err, latch.ErrApprovalRequired) }
