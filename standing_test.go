package latch_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
)

// standingPolicy lets approvers of refund.issue grant standing approvals of up to 5 calls for up
// to an hour; refund.plain allows none.
const standingPolicy = `
schema: latch.policy/v1
actions:
  refund.issue:
    effect: "refund:{order_id}"
    arguments:
      order_id: {type: string}
      amount: {type: integer}
      currency: {type: string}
    decision: approve
    approvers:
      standing: {max_uses: 5, max_for: 1h}
  refund.plain:
    effect: "plain:{order_id}"
    decision: approve
`

// The helper process of TestStandingProcessRace: a guard that presents standing approval ID once
// for a refund of order NAME, and prints "ok" or "refused REASON".
const standingChildEnv = "LATCH_TEST_STANDING_CHILD"

func standingChild(spec string) error {
	var c struct{ Store, Start, Name, ID string }
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		return err
	}
	ctx := latch.WithPrincipal(context.Background(), latch.Principal{Agent: "bot"})
	p, err := policy.Parse("latch.yaml", []byte(standingPolicy))
	if err != nil {
		return err
	}
	g, err := latch.Open(ctx, &latch.Config{Policy: p, StoreURL: c.Store})
	if err != nil {
		return err
	}
	defer g.Close()
	for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait); { // the others, to race
		if _, err := os.Stat(c.Start); err == nil {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	_, err = g.Execute(latch.WithApproval(ctx, c.ID), refundCall(c.Name, 200),
		func(context.Context, json.RawMessage) (any, error) { return "refunded", nil })
	if r := latch.RefusalOf(err); err != nil && r != nil && r.Kind != latch.KindInternal {
		fmt.Fprintf(out, "refused %s\n", r.Reason)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "ok")
	return nil
}

func refundCall(order string, amount int) *latch.Call {
	return &latch.Call{Action: "refund.issue",
		Arguments: json.RawMessage(fmt.Sprintf(`{"order_id":%q,"amount":%d,"currency":"EUR"}`, order, amount))}
}

// grantStanding asks for a refund as bot, grants the request with terms as approver, and
// returns the standing approval the grant created.
func grantStanding(t *testing.T, g *latch.Guard, approver string, terms store.StandingTerms) *store.Standing {
	t.Helper()
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "bot"})
	_, err := g.Execute(ctx, refundCall("first", 100), func(context.Context, json.RawMessage) (any, error) { return "x", nil })
	var are *latch.ApprovalRequiredError
	if !errors.As(err, &are) {
		t.Fatalf("first call: %v, want approval required", err)
	}
	if _, err := g.Answer(t.Context(), &store.AnswerRequest{ID: are.ApprovalID, Grant: true, Approver: approver, Standing: &terms}); err != nil {
		t.Fatalf("grant with standing terms: %v", err)
	}
	list, err := g.Standings(t.Context(), store.StandingFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.From == are.ApprovalID {
			return s
		}
	}
	t.Fatalf("no standing approval from %s among %d", are.ApprovalID, len(list))
	return nil
}

func openStandingGuard(t *testing.T, url string) *latch.Guard {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(standingPolicy))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// TestStandingProcessRace: a standing approval of 3 uses, presented at once by 4 OS processes
// (each refunding its own order), admits exactly 3 and refuses the 4th approval_exhausted: each
// use is spent in the reservation's transaction. The 3 receipts name the standing approval.
func TestStandingProcessRace(t *testing.T) {
	t.Parallel()
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			url := testdb.URL(t, backend, "latch_standing")
			g := openStandingGuard(t, url)
			st := grantStanding(t, g, "alice", store.StandingTerms{Uses: 3, For: store.Duration(time.Hour),
				Max: map[string]int64{"amount": 500}, Vary: []string{"order_id"}})
			const procs = 4
			start := filepath.Join(t.TempDir(), "start")
			var cmds []*exec.Cmd
			var outs []*strings.Builder
			for i := range procs {
				spec, _ := json.Marshal(map[string]any{"Store": url, "Start": start, "Name": fmt.Sprintf("o-%d", i), "ID": st.ID})
				cmd := exec.Command(os.Args[0])
				cmd.Env = append(os.Environ(), standingChildEnv+"="+string(spec))
				out, errOut := &strings.Builder{}, &strings.Builder{}
				cmd.Stdout, cmd.Stderr = out, errOut
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds, outs = append(cmds, cmd), append(outs, out)
				t.Cleanup(func() {
					if t.Failed() && errOut.Len() > 0 {
						t.Logf("process %d stderr:\n%s", i, errOut)
					}
				})
			}
			if err := os.WriteFile(start, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			ok, exhausted := 0, 0
			for i, cmd := range cmds {
				if err := cmd.Wait(); err != nil {
					t.Fatalf("process %d: %v", i, err)
				}
				switch line := strings.TrimSpace(outs[i].String()); line {
				case "ok":
					ok++
				case "refused approval_exhausted":
					exhausted++
				default:
					t.Errorf("process %d: %q", i, line)
				}
			}
			if ok != 3 || exhausted != 1 {
				t.Fatalf("%d admitted, %d refused approval_exhausted; want exactly 3 and 1", ok, exhausted)
			}
			cur, err := g.Standing(t.Context(), st.ID)
			if err != nil {
				t.Fatal(err)
			}
			if cur.Uses != 3 || store.StandingState(cur, time.Now()) != store.StandingExhausted {
				t.Errorf("standing approval after the race: %d uses, %s; want 3, exhausted", cur.Uses, store.StandingState(cur, time.Now()))
			}
			named := 0
			for s, err := range g.Store().Receipts(t.Context(), store.ReceiptFilter{ApprovalID: st.ID}) {
				if err != nil {
					t.Fatal(err)
				}
				var doc struct {
					Result, Approver string
					ApprovalID       string `json:"approval_id"`
				}
				if err := json.Unmarshal(s.Doc, &doc); err != nil {
					t.Fatal(err)
				}
				if doc.Result == "committed" {
					named++
					if doc.Approver != "alice" || doc.ApprovalID != st.ID {
						t.Errorf("receipt %d names approver %q, approval %q; want alice, %s", s.Seq, doc.Approver, doc.ApprovalID, st.ID)
					}
				}
			}
			if named != 3 {
				t.Errorf("%d committed receipts name %s, want 3", named, st.ID)
			}
			verifyChain(t, g)
		})
	}
}
