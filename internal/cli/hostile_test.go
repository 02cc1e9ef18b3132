package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/cli"
	"github.com/latchkit/latch/store"
)

const hostilePolicy = `schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
  refund.issue:
    decision: approve
`

// Hostile text that would act on a terminal: clear the screen, write the clipboard (OSC 52),
// reverse the reading order (U+202E), and an 8-bit CSI.
const (
	clearScreen = "\x1b[2J"
	clipboard   = "\x1b]52;c;cm0gLXJmIH4=\x07"
	rlo         = "\u202e"
	csi8        = "\u009b"
)

// TestHumanOutputEscapesTerminalControls fills a store with calls whose arguments, action name,
// agent, effect key and error text carry terminal controls and bidi overrides, then runs the
// operator's commands: no human output holds a raw control or bidi character, and JSON output
// is the stored bytes exactly.
func TestHumanOutputEscapesTerminalControls(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pol := filepath.Join(dir, "latch.yaml")
	if err := os.WriteFile(pol, []byte(hostilePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	storeURL := "sqlite:" + filepath.Join(dir, "state.db")
	g, err := latch.Open(t.Context(), &latch.Config{PolicyPath: pol, StoreURL: storeURL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := latch.WithPrincipal(t.Context(), latch.Principal{Agent: "worker" + rlo + "nimda", User: "ana" + clearScreen})
	hostile, _ := json.Marshal(map[string]any{"invoice_id": "inv" + clipboard, "note": rlo + "txt.exe" + csi8 + "1m"})
	_, err = g.Execute(ctx, &latch.Call{Action: "billing.charge", Arguments: hostile}, func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("gateway said " + clearScreen + clipboard)
	})
	if !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatalf("charge: %v, want ambiguous", err)
	}
	_, err = g.Execute(ctx, &latch.Call{Action: "refund.issue", Arguments: hostile}, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	var ar *latch.ApprovalRequiredError
	if !errors.As(err, &ar) {
		t.Fatalf("refund: %v, want an approval request", err)
	}
	rc, _ := g.Execute(ctx, &latch.Call{Action: "evil" + clipboard + rlo, Arguments: hostile}, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
	if rc == nil {
		t.Fatal("unknown action: no receipt")
	}
	g.Close()

	run := func(args ...string) (string, string) {
		var out, errOut bytes.Buffer
		cli.Main(t.Context(), append(args, "--policy", pol, "--store", storeURL), &out, &errOut, func(string) string { return "" })
		return out.String(), errOut.String()
	}
	for _, args := range [][]string{
		{"approvals"}, {"effects"}, {"effects", "--state", "ambiguous"}, {"receipts"},
		{"inspect", rc.ActionID}, {"inspect", ar.ApprovalID}, {"inspect", "charge:inv" + clipboard},
		{"resolve", "charge:inv" + clipboard + "x", "--failed", "--as", "bob"}, {"receipts", "--verify"},
	} {
		out, errOut := run(args...)
		for _, s := range []string{out, errOut} {
			if i := strings.IndexFunc(s, func(r rune) bool {
				return r == 0x1b || r == 0x07 || r == 0x9b || r == 0x202e || r == utf8.RuneError
			}); i >= 0 {
				t.Errorf("latch %s printed a raw control or bidi character at byte %d:\n%q", strings.Join(args, " "), i, s)
			}
		}
		if !strings.Contains(out+errOut, `\x1b`) && !strings.Contains(out+errOut, `\u202e`) && args[0] != "receipts" {
			t.Errorf("latch %s shows none of the hostile text escaped:\nstdout %q\nstderr %q", strings.Join(args, " "), out, errOut)
		}
	}

	// JSON output holds the stored documents, byte for byte.
	out, _ := run("receipts", "--json")
	st, err := latch.OpenStore(t.Context(), storeURL, &latch.StoreOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var want bytes.Buffer
	for r, err := range st.Receipts(t.Context(), store.ReceiptFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&want, `{"seq":%d,"hash":"%s","receipt":%s,"unreadable":null}`+"\n", r.Seq, r.Hash, r.Doc)
	}
	if out != want.String() {
		t.Errorf("receipts --json =\n%q\nwant the stored documents exactly:\n%q", out, want.String())
	}
	if !strings.Contains(out, rlo) {
		t.Errorf("receipts --json lost the U+202E of the arguments: %q", out)
	}
}
