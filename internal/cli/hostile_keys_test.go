package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/cli"
	"github.com/latchkit/latch/internal/hostile"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/store"
)

// anyKeyPolicy makes the effect key exactly what the agent sends.
const anyKeyPolicy = `schema: latch.policy/v1
actions:
  any.call:
    effect: "{key}"
    arguments:
      key: { type: string }
      note: { type: string }
    decision: allow
`

// TestHostileKeysInCLI: every key shape an agent can send (internal/hostile.Keys, with a
// hostile text among the arguments), left ambiguous, is shown by `latch effects` and
// `latch inspect` with no invisible character carried through raw — each one is written as its
// visible escape — and `latch inspect KEY` and `latch resolve KEY` reach exactly that key's
// effect: inspect shows its attempt and no other's, resolve settles it and nothing else. The
// plain key the decoys read as is resolved last, untouched until then.
func TestHostileKeysInCLI(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(pol, []byte(anyKeyPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := "sqlite:" + filepath.Join(dir, "state.db")
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: pol, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker"})
	const victim = "pay:inv88"
	actionOf := map[string]string{}
	var keys []string
	for i, k := range hostile.Keys {
		if len(k.Value) > store.MaxText {
			continue // refused by every surface before it is a key (TestHostileKeysOverHTTP)
		}
		args, _ := json.Marshal(map[string]string{"key": k.Value, "note": hostile.Texts[i%len(hostile.Texts)].Value})
		rc, err := g.Execute(ctx, &latch.Call{Action: "any.call", Arguments: args}, func(context.Context, json.RawMessage) (any, error) {
			return nil, errors.New("read tcp: connection reset by peer")
		})
		if !errors.Is(err, latch.ErrAmbiguous) {
			t.Fatalf("Execute(key %q) = %v, want ambiguous", k.Value, err)
		}
		keys = append(keys, k.Value)
		actionOf[k.Value] = rc.ActionID
	}
	g.Close()

	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		code := cli.Main(t.Context(), append(args, "--policy", pol, "--store", storeURL), &out, &errOut, func(string) string { return "" })
		if code != 0 {
			t.Errorf("latch %q = exit %d: %s", args, code, errOut.String())
		}
		all := out.String() + errOut.String()
		// The output's own line breaks and tabs aside, no invisible character comes through; and
		// no key that holds one (a line break or a tab among them) appears raw.
		for _, r := range hostile.Invisible(all) {
			if r != '\n' && r != '\t' {
				t.Errorf("latch %q printed the invisible character %U raw", args, r)
				break
			}
		}
		for _, k := range keys {
			if len(hostile.Invisible(k)) > 0 && strings.Contains(all, k) {
				t.Errorf("latch %q printed the key %q raw", args, k)
			}
		}
		return out.String()
	}
	list := run("effects", "--state", "ambiguous")
	for _, k := range keys {
		if !strings.Contains(list, safetext.Escape(k)) {
			t.Errorf("latch effects does not show the key %q as %q", k, safetext.Escape(k))
		}
	}
	states := func() map[string]store.State {
		st, err := latch.OpenStore(t.Context(), storeURL, &latch.StoreOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		out := map[string]store.State{}
		for _, k := range keys {
			e, err := st.Effect(t.Context(), k)
			if err != nil {
				t.Fatalf("Effect(%q): %v", k, err)
			}
			out[k] = e.State
		}
		return out
	}
	order := []string{}
	for _, k := range keys {
		if k != victim {
			order = append(order, k)
		}
	}
	for _, k := range append(order, victim) {
		out := run("inspect", k)
		if !strings.Contains(out, actionOf[k]) {
			t.Errorf("latch inspect %q does not show its own attempt %s", k, actionOf[k])
		}
		for _, o := range keys {
			if o != k && strings.Contains(out, actionOf[o]) {
				t.Errorf("latch inspect %q shows the attempt of ANOTHER key %q", k, o)
			}
		}
		before := states()
		run("resolve", k, "--failed", "--as", "bob", "--note", "checked: nothing happened")
		after := states()
		for _, o := range keys {
			switch {
			case o == k && after[o] != store.Failed:
				t.Errorf("latch resolve %q left it %s", k, after[o])
			case o != k && after[o] != before[o]:
				t.Errorf("latch resolve %q changed ANOTHER effect %q: %s → %s", k, o, before[o], after[o])
			}
		}
	}
}
