package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/sqlitebare"
)

// misbehave is how a test executor departs from an honest one.
type misbehave int

const (
	honest     misbehave = iota // appends its execution, returns nil
	lies                        // appends its execution, then claims NotExecuted
	silent                      // returns nil without appending: an effect nobody counted
	lostReply                   // appends its execution, then errors: ambiguous
	secondCopy                  // honest, and a second run outside latch appends again
)

// runOne makes one campaign.pay call on a real SQLite store with an executor that behaves as m.
func runOne(t *testing.T, g *latch.Guard, ledger *Ledger, key string, m misbehave) {
	t.Helper()
	ctx := latch.WithPrincipal(t.Context(), principal)
	ekey := EffectKey(ActionPay, key)
	_, err := g.Execute(ctx, &latch.Call{Action: ActionPay, Arguments: args(key)}, func(ctx context.Context, _ json.RawMessage) (any, error) {
		if m == silent {
			return nil, nil
		}
		if err := ledger.Append(Execution{Key: ekey, Token: latch.IdempotencyToken(ctx), PID: os.Getpid()}); err != nil {
			t.Fatal(err)
		}
		switch m {
		case lies:
			return nil, latch.NotExecuted(errors.New("it did run"))
		case lostReply:
			return nil, errors.New("reply lost")
		case secondCopy:
			if err := ledger.Append(Execution{Key: ekey, PID: os.Getpid()}); err != nil {
				t.Fatal(err)
			}
		}
		return "ok", nil
	})
	if m == honest && err != nil {
		t.Fatalf("honest call on %s: %v", key, err)
	}
}

// TestCheck shows every invariant of the checker able to fail, on a real SQLite store, and the
// honest control passing: a second execution, an execution recorded failed, a commit nobody
// executed, an unexplained ambiguity and an edited receipt are each named.
func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		m      misbehave
		attr   Attribution
		tamper bool
		want   func(*Report) []string
	}{
		{"honest", honest, nil, false, nil},
		{"double", secondCopy, nil, false, func(r *Report) []string { return r.Double }},
		{"lying NotExecuted", lies, nil, false, func(r *Report) []string { return r.Stray }},
		{"uncounted commit", silent, nil, false, func(r *Report) []string { return r.Phantom }},
		{"unattributed ambiguity", lostReply, func(string) string { return "" }, false, func(r *Report) []string { return r.Unattributed }},
		{"edited receipt", honest, nil, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			url := "sqlite:" + filepath.Join(dir, "state.db")
			st, err := latch.OpenStore(t.Context(), url, nil)
			if err != nil {
				t.Fatal(err)
			}
			g, err := openGuard(t.Context(), st)
			if err != nil {
				t.Fatal(err)
			}
			ledger, err := OpenLedger(filepath.Join(dir, executionsFile), true)
			if err != nil {
				t.Fatal(err)
			}
			runOne(t, g, ledger, "a", honest) // every store holds one honest call as well
			runOne(t, g, ledger, "b", tt.m)
			ledger.Close()
			g.Close()
			if tt.tamper {
				db, err := sqlitebare.Open(url)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := db.Exec(`UPDATE receipts SET doc = replace(doc, '"key":"a"', '"key":"z"') WHERE seq = 1`); err != nil {
					t.Fatal(err)
				}
				db.Close()
			}

			rep, err := Check(t.Context(), url, filepath.Join(dir, executionsFile), tt.attr)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.name == "honest":
				if err := rep.Err(); err != nil || rep.Executions != 2 || rep.States["committed"] != 2 || rep.Chain.Verified != 2 {
					t.Errorf("honest calls: %s: %v", rep.Summary(), err)
				}
			case tt.tamper:
				if rep.Chain.OK || rep.Err() == nil || !strings.Contains(string(rep.Chain.Breaks), "content_altered") {
					t.Errorf("edited receipt: chain %+v, Err() = %v; want content_altered", rep.Chain, rep.Err())
				}
			default:
				got := tt.want(rep)
				if len(got) != 1 || !strings.HasPrefix(got[0], "pay:b") || rep.Err() == nil {
					t.Errorf("%s: named %q, Err() = %v; want pay:b named and an error", tt.name, got, rep.Err())
				}
			}
		})
	}
}

// TestAttribute: a blocked key is explained only by a fault that can leave a key blocked.
func TestAttribute(t *testing.T) {
	t.Parallel()
	attr := Attribute([]Injection{
		{Kind: FaultNotExecuted, Key: "pay:a"},
		{Kind: FaultConnCut},
		{Kind: FaultTimeout, Key: "pay:b"},
		{Kind: FaultPanic, Key: "pay:b"},
		{Kind: FaultStoreError, Key: "pay:c"},
	})
	got := []string{attr("pay:a"), attr("pay:b"), attr("pay:c"), attr("pay:d")}
	if want := []string{"", FaultTimeout, FaultStoreError, ""}; !slices.Equal(got, want) {
		t.Errorf("Attribute = %q, want %q", got, want)
	}
}
