package wrapsqlite_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/cli"
	"github.com/latchkit/latch/internal/testdb"
	"github.com/latchkit/latch/internal/verify"
	"github.com/latchkit/latch/internal/wrapsqlite"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/storetest"
	"go.uber.org/goleak"
)

// backend is the wrapsqlite backend as the conformance suite sees it: fresh stores from
// internal/testdb and opened with store.Open, both by scheme alone.
var backend = storetest.Backend{
	Name: wrapsqlite.Scheme,
	New:  func(t *testing.T) string { return testdb.URL(t, wrapsqlite.Scheme, "wrapsqlite") },
	Open: func(ctx context.Context, url string) (store.Store, error) {
		st, err := store.Open(ctx, url, nil)
		if err != nil {
			return nil, err
		}
		if _, ok := st.(*wrapsqlite.Store); !ok {
			st.Close()
			return nil, errors.New("store.Open did not reach the wrapsqlite backend")
		}
		return st, nil
	},
}

func TestMain(m *testing.M) {
	storetest.Child(backend) // first: a re-executed racer does its part and exits here
	goleak.VerifyTestMain(m) // stores, racers and verify runs all end with their test
}

// TestConformance runs the whole conformance suite on the third backend, opened through the
// registry.
func TestConformance(t *testing.T) {
	storetest.Run(t, backend)
}

const policyDoc = `schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: allow
`

type invoice struct {
	InvoiceID string `json:"invoice_id"`
}

// openGuard opens a guard deciding by policyDoc on the store at u.
func openGuard(t *testing.T, u string) *latch.Guard {
	t.Helper()
	p, err := policy.Parse("latch.yaml", []byte(policyDoc))
	if err != nil {
		t.Fatal(err)
	}
	g, err := latch.Open(t.Context(), &latch.Config{Policy: p, StoreURL: u})
	if err != nil {
		t.Fatalf("latch.Open(%s) = %v", u, err)
	}
	return g
}

// TestLatchOpen opens a guard on a wrapsqlite: URL through latch.Open: the store is the third
// backend's, a retried call is refused as on any store, and a read-only open refuses writes with
// store.ErrReadOnly.
func TestLatchOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := testdb.URL(t, wrapsqlite.Scheme, "wrapsqlite")
	if !strings.HasPrefix(u, wrapsqlite.Scheme+":") {
		t.Fatalf("testdb.URL(%q) = %q, want a %s: URL", wrapsqlite.Scheme, u, wrapsqlite.Scheme)
	}
	g := openGuard(t, u)
	if _, ok := g.Store().(*wrapsqlite.Store); !ok {
		t.Errorf("latch.Open(%s): store is %T, want *wrapsqlite.Store", u, g.Store())
	}
	charges := 0
	charge := latch.Protect(g, "billing.charge", func(ctx context.Context, inv invoice) (string, error) {
		charges++
		return "ch_" + inv.InvoiceID, nil
	}, nil)
	pctx := latch.WithPrincipal(ctx, latch.Principal{Agent: "billing-worker"})
	if _, err := charge(pctx, invoice{"inv_1"}); err != nil {
		t.Fatalf("first charge = %v", err)
	}
	if _, err := charge(pctx, invoice{"inv_1"}); !errors.Is(err, latch.ErrDuplicateEffect) {
		t.Errorf("retried charge = %v, want ErrDuplicateEffect", err)
	}
	if charges != 1 {
		t.Errorf("charges = %d, want 1", charges)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := latch.OpenStore(ctx, u, &latch.StoreOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("latch.OpenStore(%s, read-only) = %v", u, err)
	}
	defer ro.Close()
	e, err := ro.Effect(ctx, "charge:inv_1")
	if err != nil || e.State != store.Committed {
		t.Errorf("Effect(charge:inv_1) = %+v, %v; want committed", e, err)
	}
	_, err = ro.Resolve(ctx, &store.ResolveRequest{Key: "charge:inv_1", To: store.Failed, By: "cli:ana"})
	if !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("read-only Resolve = %v, want store.ErrReadOnly", err)
	}
}

// TestScratch asks the registry for scratch stores of the third backend: they are its URLs,
// distinct, usable, and gone after Close.
func TestScratch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	sc, err := store.NewScratch(ctx, wrapsqlite.Scheme+":", &store.ScratchConfig{Prefix: "wraptest", Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("NewScratch = %v", err)
	}
	a, err := sc.URL(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := sc.URL(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if a == b || !strings.HasPrefix(a, wrapsqlite.Scheme+":") || !strings.HasPrefix(b, wrapsqlite.Scheme+":") {
		t.Fatalf("scratch URLs %q, %q: want two distinct %s: URLs", a, b, wrapsqlite.Scheme)
	}
	st, err := store.Open(ctx, a, nil)
	if err != nil {
		t.Fatalf("open scratch %s: %v", a, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sc.Close(ctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if _, err := store.Open(ctx, a, &store.OpenOptions{ReadOnly: true}); !errors.Is(err, store.ErrNoStore) {
		t.Errorf("read-only open of %s after Close = %v, want ErrNoStore", a, err)
	}
}

// TestVerify runs guarantees of latch verify on the third backend's scratch stores, G11 among
// them, which edits a receipt below the store (internal/storeraw).
// It runs alone (not in parallel), so that the stores the backend opened meanwhile are verify's.
func TestVerify(t *testing.T) {
	before := wrapsqlite.Opened()
	p, err := policy.Parse("latch.yaml", []byte(policyDoc))
	if err != nil {
		t.Fatal(err)
	}
	only := []string{"G3", "G11"}
	rep, err := verify.Run(t.Context(), &verify.Config{Policy: p, StoreURL: wrapsqlite.Scheme + ":", Only: only})
	if err != nil {
		t.Fatalf("verify.Run = %v", err)
	}
	var out bytes.Buffer
	rep.WriteText(&out)
	if rep.Backend != wrapsqlite.Scheme || rep.Passed != len(only) {
		t.Errorf("verify on %s: backend %q, %d passed, want %d:\n%s", wrapsqlite.Scheme, rep.Backend, rep.Passed, len(only), out.String())
	}
	if n := wrapsqlite.Opened() - before; n < int64(len(only)) {
		t.Errorf("verify opened %d stores of the backend, want one at least per guarantee (%d)", n, len(only))
	}
}

// TestCommand runs the latch command with --store naming the third backend: the demo on its
// scratch stores, and a read command on a store of it.
//
// It runs alone (not in parallel), so that the stores the backend opened meanwhile are the
// command's.
func TestCommand(t *testing.T) {
	ctx := t.Context()
	env := map[string]string{"TMPDIR": t.TempDir(), "HOME": t.TempDir()}
	getenv := func(k string) string { return env[k] }
	var stdout, stderr bytes.Buffer
	before := wrapsqlite.Opened()
	if code := cli.Main(ctx, []string{"demo", "--store", wrapsqlite.Scheme + ":"}, &stdout, &stderr, getenv); code != 0 {
		t.Fatalf("latch demo --store %s: = exit %d\n%s\n%s", wrapsqlite.Scheme+":", code, stdout.String(), stderr.String())
	}
	if n := wrapsqlite.Opened() - before; n < 2 {
		t.Errorf("latch demo opened %d stores of the backend, want its two scratch stores", n)
	}
	if left, _ := os.ReadDir(env["TMPDIR"]); len(left) != 0 {
		t.Errorf("latch demo left %d entries in $TMPDIR, want its scratch stores removed", len(left))
	}

	u := testdb.URL(t, wrapsqlite.Scheme, "wrapsqlite")
	g := openGuard(t, u) // a worker writes, the command reads
	charge := latch.Protect(g, "billing.charge", func(ctx context.Context, inv invoice) (string, error) {
		return "ch_" + inv.InvoiceID, nil
	}, nil)
	if _, err := charge(latch.WithPrincipal(ctx, latch.Principal{Agent: "billing-worker"}), invoice{"inv_7"}); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := cli.Main(ctx, []string{"effects", "--store", u, "--json"}, &stdout, &stderr, getenv); code != 0 {
		t.Fatalf("latch effects --store %s = exit %d\n%s", u, code, stderr.String())
	}
	if got := stdout.String(); !strings.Contains(got, `"charge:inv_7"`) || !strings.Contains(got, `"committed"`) {
		t.Errorf("latch effects --store %s --json = %q, want the committed charge:inv_7", u, got)
	}
	stdout.Reset()
	stderr.Reset()
	if code := cli.Main(ctx, []string{"effects", "--store", "nosuch:x"}, &stdout, &stderr, getenv); code == 0 ||
		!strings.Contains(stderr.String(), wrapsqlite.Scheme) {
		t.Errorf("latch effects --store nosuch:x = exit %d, %q; want a refusal listing %s among the registered schemes", code, stderr.String(), wrapsqlite.Scheme)
	}
}
