package postgres

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/storetest"
)

// cutMode says what the proxy does with the next COMMIT it sees.
type cutMode int32

const (
	cutNone   cutMode = iota
	cutBefore         // drop both connections instead of forwarding COMMIT: the commit never happens
	cutAfter          // forward COMMIT, wait for the server's reply, drop it and both connections: the commit happened
	cutSent           // forward COMMIT and drop both connections at once: the server commits, maybe after the client has re-read
)

func (m cutMode) String() string {
	return [...]string{"none", "before COMMIT", "after COMMIT's reply", "right after sending COMMIT"}[m]
}

// cutProxy is a TCP proxy in front of PostgreSQL that understands just enough of the frontend
// protocol to find a COMMIT (a simple Query, or a Parse in the extended protocol) and cut the
// connection there, once per arming.
type cutProxy struct {
	ln     net.Listener
	target string
	armed  atomic.Int32 // a cutMode, taken by the first COMMIT
	cuts   atomic.Int64
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

// dropAll closes every connection through the proxy, as a server restart or a firewall would.
func (p *cutProxy) dropAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *cutProxy) arm(m cutMode) { p.armed.Store(int32(m)) }

// take returns the armed mode and disarms.
func (p *cutProxy) take() cutMode { return cutMode(p.armed.Swap(int32(cutNone))) }

func (p *cutProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c)
		p.wg.Go(func() { p.handle(c) })
	}
}

func (p *cutProxy) handle(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.track(server)
	var once sync.Once
	cut := func() {
		once.Do(func() {
			client.Close()
			server.Close()
		})
	}
	defer cut()
	var replyCuts atomic.Bool // the next bytes from the server answer a COMMIT: drop them and cut
	p.wg.Go(func() {
		defer cut()
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			if n > 0 {
				if replyCuts.Load() {
					return
				}
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})

	r := bufio.NewReader(client)
	// Startup: untyped messages. SSL and GSS encryption requests are answered with one byte and
	// followed by another untyped message; anything else (startup, cancel) ends the phase.
	for {
		msg, err := readMessage(r, false)
		if err != nil {
			return
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
		if code := binary.BigEndian.Uint32(msg[4:8]); code != 80877103 && code != 80877104 {
			break
		}
	}
	for {
		msg, err := readMessage(r, true)
		if err != nil {
			return
		}
		if isCommit(msg) {
			switch p.take() {
			case cutBefore:
				p.cuts.Add(1)
				return
			case cutAfter:
				p.cuts.Add(1)
				replyCuts.Store(true)
			case cutSent:
				p.cuts.Add(1)
				replyCuts.Store(true) // a fast reply must not slip through before the cut
				server.Write(msg)
				return
			}
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// readMessage reads one frontend message: [type byte] int32 length, body.
func readMessage(r *bufio.Reader, typed bool) ([]byte, error) {
	head := 4
	if typed {
		head = 5
	}
	msg := make([]byte, head)
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(msg[head-4:]))
	if n < 4 || n > 1<<30 {
		return nil, fmt.Errorf("bad message length %d", n)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return append(msg, body...), nil
}

// isCommit reports a simple Query ('Q') whose text is COMMIT, or an extended-protocol Parse ('P')
// of COMMIT (what pgx would send with a non-simple exec mode).
func isCommit(msg []byte) bool {
	body := msg[5:]
	var text []byte
	switch msg[0] {
	case 'Q':
		text, _, _ = bytes.Cut(body, []byte{0})
	case 'P':
		_, rest, _ := bytes.Cut(body, []byte{0}) // statement name
		text, _, _ = bytes.Cut(rest, []byte{0})
	default:
		return false
	}
	s := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(string(text)), ";"))
	return strings.EqualFold(s, "commit") || strings.EqualFold(s, "end")
}

// cutCall is one proposal in the cut tests.
type cutCall struct {
	key, actionID, hash string
	approvalID          string
}

// newCutCall is a new attempt of the action under key: calls under one key share an action hash
// (another hash would be a key_conflict).
func newCutCall(key string) cutCall {
	sum := sha256.Sum256([]byte("billing.charge " + key))
	return cutCall{key: key, actionID: "act_" + randomHex(16), hash: "sha256:" + hex.EncodeToString(sum[:])}
}

func (c cutCall) draft(now time.Time) *receipt.Receipt {
	return &receipt.Receipt{
		ReceiptID: "rcp_" + randomHex(16), ActionID: c.actionID, Action: "billing.charge", ActionHash: c.hash,
		Arguments: json.RawMessage(`{"invoice_id":"inv_1"}`), Principal: receipt.Principal{Agent: "agent:test"},
		Environment: "production", Decision: "allow", ApprovalID: c.approvalID, EffectKey: c.key, StartedAt: now,
		Mode: "enforce",
	}
}

func (c cutCall) reserveReq(now time.Time) *store.ReserveRequest {
	return &store.ReserveRequest{
		Now: now, ActionID: c.actionID, Action: "billing.charge", ActionHash: c.hash, EffectKey: c.key,
		Lease: time.Hour, ApprovalID: c.approvalID, Receipt: c.draft(now),
		Events: []store.Event{{Kind: store.EventActionProposed, Time: now, ActionID: c.actionID, EffectKey: c.key}},
	}
}

func (c cutCall) recordReq(now time.Time, attempt int) *store.RecordRequest {
	rc := c.draft(now)
	rc.Result, rc.Attempt, rc.FinishedAt = receipt.Committed, attempt, now
	return &store.RecordRequest{
		Now: now, Receipt: rc, EffectKey: c.key, ActionID: c.actionID, Attempt: attempt,
		Outcome: store.Committed, Result: json.RawMessage(`{"ok":true}`),
	}
}

// once is r made once (store.RecordRequest.Once) when made is true.
func once(r *store.RecordRequest, made bool) *store.RecordRequest {
	r.Once = made
	return r
}

// TestCutCommit runs reservations and records through a proxy that cuts the connection at
// COMMIT — before forwarding it (the transaction never commits), after the server answered it (it
// committed; only the reply is lost), or right after forwarding it (the server commits, perhaps
// only after the store has re-read) — and checks every claim the store makes against the rows,
// read directly.
//
// The two properties:
//
//   - The store never reports a reservation it does not hold: Reserve reporting Reserved means
//     the row is executing under this action id (and the approval, when one was presented, is
//     consumed by it).
//   - The store never loses a reservation it holds. Losing one means: the row is executing under
//     this action id, yet Reserve returned an error or a refusal. The caller would not execute,
//     and nobody else could — the key would sit in progress until the lease lapsed into
//     ambiguous, a false "we do not know" for an effect that never ran. (A naive retry after a
//     lost COMMIT does exactly this: it re-reads its own row, and the retry table refuses it as
//     in_progress — the same answer a genuine second Reserve by the same action id gets, which
//     is checked here too.) Here nothing else contends, so every Reserve must report Reserved.
//
// Record is held to the same rules: the outcome is written once, its receipt exists exactly once
// (a re-issue after a commit that did land would append a duplicate), and the chain verifies.
func TestCutCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	direct, proxy, proxied, settled := cutStores(t, 4)

	const iterations = 200
	start := time.Now()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := range iterations {
		now = now.Add(time.Second)
		c := newCutCall(fmt.Sprintf("cut:%d", i))
		withApproval := i%4 == 3
		if withApproval {
			c.approvalID = grantApproval(t, direct, c.hash, now)
		}
		rotation := []cutMode{cutBefore, cutAfter, cutSent}
		modes := [2]cutMode{rotation[i%3], rotation[(i+1)%3]}
		what := fmt.Sprintf("iteration %d (reserve cut %s, record cut %s, approval %t)", i, modes[0], modes[1], withApproval)

		// Reserve, its COMMIT cut.
		cuts := proxy.cuts.Load()
		proxy.arm(modes[0])
		res, err := proxied.Reserve(ctx, c.reserveReq(now))
		if proxy.take() != cutNone || proxy.cuts.Load() != cuts+1 {
			t.Fatalf("%s: the proxy cut no COMMIT of Reserve (it returned %+v, %v)", what, res, err)
		}
		row, rerr := direct.Effect(ctx, c.key)
		if rerr != nil && !errors.Is(rerr, store.ErrNotFound) {
			t.Fatal(rerr)
		}
		ours := rerr == nil && row.State == store.Executing && row.ActionID == c.actionID
		reported := err == nil && res.Reserved
		switch {
		case reported && !ours:
			t.Fatalf("%s: Reserve reported a reservation it does not hold: row %+v", what, row)
		case ours && !reported:
			t.Fatalf("%s: the row is ours but Reserve returned %+v, %v: a lost reservation", what, res, err)
		case !ours:
			t.Fatalf("%s: uncontended Reserve did not reserve: %+v, %v; row %+v", what, res, err, row)
		}
		if got, want := res.Effect, row; got.ActionID != want.ActionID || got.Attempt != want.Attempt || !got.LeaseExpiresAt.Equal(want.LeaseExpiresAt) {
			t.Fatalf("%s: Reserve reported effect %+v, the row is %+v", what, got, want)
		}
		if withApproval {
			a, err := direct.Approval(ctx, c.approvalID)
			if err != nil || a.Status != store.Consumed || a.ConsumedBy != c.actionID {
				t.Fatalf("%s: approval after the reservation = %+v, %v, want consumed by %s", what, a, err, c.actionID)
			}
		}
		evs, err := direct.Events(ctx, store.EventFilter{ActionID: c.actionID})
		if err != nil {
			t.Fatal(err)
		}
		if n := count(evs, store.EventEffectReserved); n != 1 {
			t.Fatalf("%s: %d effect_reserved events, want exactly 1", what, n)
		}
		// The same action id reserving again meets its own live lease: refused in_progress (or
		// consumed, for its spent approval), the row untouched: the store never mistakes a
		// second call for the first one.
		// (No receipt, so that the action's only receipt is the one Record writes.)
		againReq := c.reserveReq(now)
		againReq.Receipt = nil
		again, err := direct.Reserve(ctx, againReq)
		want := "in_progress"
		if withApproval {
			want = "consumed" // approval checks come first (SPEC §5.5)
		}
		if err != nil || again.Reserved || again.Refusal == nil || again.Refusal.Reason != want {
			t.Fatalf("%s: re-Reserve by the same action id = %+v, %v, want refused %s", what, again, err, want)
		}
		if row2, err := direct.Effect(ctx, c.key); err != nil || !reflect.DeepEqual(row2, row) {
			t.Fatalf("%s: re-Reserve changed the row: %+v, %v, was %+v", what, row2, err, row)
		}

		// Record, its COMMIT cut.
		cuts = proxy.cuts.Load()
		proxy.arm(modes[1])
		// Every other record is made once, as an outcome posted over HTTP is: a re-issue that finds
		// its own lost attempt landed late must return it, not refuse it as recorded already.
		rec, err := proxied.Record(ctx, once(c.recordReq(now.Add(time.Millisecond), res.Effect.Attempt), i%2 == 1))
		if proxy.take() != cutNone || proxy.cuts.Load() != cuts+1 {
			t.Fatalf("%s: the proxy cut no COMMIT of Record (it returned %+v, %v)", what, rec, err)
		}
		if err != nil || rec.Lost {
			t.Fatalf("%s: Record = %+v, %v, want the outcome recorded", what, rec, err)
		}
		row, err = direct.Effect(ctx, c.key)
		if err != nil || row.State != store.Committed || row.ActionID != c.actionID {
			t.Fatalf("%s: after Record the row is %+v, %v, want committed by %s", what, row, err, c.actionID)
		}
		got := receiptsOf(t, direct, c.actionID)
		if len(got) != 1 || got[0].Seq != rec.Receipt.Seq || got[0].Hash != rec.Receipt.Hash {
			t.Fatalf("%s: the action has %d receipts (seqs %v), want exactly the one Record returned (seq %d)", what, len(got), seqsOf(got), rec.Receipt.Seq)
		}
	}
	elapsed := time.Since(start)

	head, err := direct.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := receipt.Verify(direct.Receipts(ctx, store.ReceiptFilter{}), head)
	// One receipt a call, and the record of each approval's answer (every fourth call's).
	if want := int64(iterations + iterations/4); err != nil || !rep.OK || rep.Verified != want {
		t.Fatalf("Verify() = %+v, %v, want %d receipts, no breaks", rep, err, want)
	}
	landed, notLanded, late := settled.count("lost commit settled: it landed"),
		settled.count("lost commit settled: it did not land; re-issuing"), settled.count("lost commit found landed")
	t.Logf("%d iterations, %d COMMITs cut, in %v: %d settled as landed, %d as not landed and re-issued (%d of those found landed late)",
		iterations, proxy.cuts.Load(), elapsed.Round(time.Millisecond), landed, notLanded, late)
	if landed+notLanded != 2*iterations || landed == 0 || notLanded == 0 {
		t.Errorf("every cut COMMIT must be settled one way or the other, and both ways must occur")
	}
}

// countHandler is a slog.Handler counting messages.
type countHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countHandler) WithGroup(string) slog.Handler            { return h }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.n[r.Message]++
	h.mu.Unlock()
	return nil
}

func (h *countHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[msg]
}

// wantReissued fails the test unless some write was settled as not landed and re-issued: the
// path the cut-COMMIT tests are about.
func (h *countHandler) wantReissued(t *testing.T) {
	t.Helper()
	if h.count("lost commit settled: it did not land; re-issuing") == 0 {
		t.Errorf("no write was re-issued: the path under test did not run")
	}
}

// openProxied opens the store at u through a new cutProxy (u's schema must exist already).
func openProxied(t *testing.T, u string, cfg *Config) (*cutProxy, *Store) {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	target := pu.Host
	if target == "" {
		t.Skip("LATCH_TEST_POSTGRES_URL names no TCP host to proxy")
	}
	if pu.Port() == "" {
		target = net.JoinHostPort(pu.Hostname(), "5432")
	}
	proxy := newCutProxy(t, target)
	pu.Host = proxy.addr()
	st, err := Open(t.Context(), pu.String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return proxy, st
}

// cutStores opens a fresh schema twice: directly, to read what landed, and through a cutProxy
// with maxConns connections, counting what the store logs (settled).
func cutStores(t *testing.T, maxConns int32) (direct *Store, proxy *cutProxy, proxied *Store, settled *countHandler) {
	t.Helper()
	u := newSchemaURL(t)
	direct, err := Open(t.Context(), u, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	settled = &countHandler{n: map[string]int{}}
	proxy, proxied = openProxied(t, u, &Config{MaxConns: maxConns, Logger: slog.New(settled)})
	return direct, proxy, proxied, settled
}

// cutEnv is what a round of a cut-COMMIT test works with (cutRounds).
type cutEnv struct {
	ctx     context.Context
	now     time.Time
	direct  *Store // reads what landed
	proxied *Store // writes through proxy
	proxy   *cutProxy
}

// cutRounds runs round n times on a fresh schema, the cut modes in turn, in parallel with the
// other tests, and then fails the test unless some write was settled as not landed and re-issued.
func cutRounds(t *testing.T, n int, round func(e *cutEnv, i int, mode cutMode)) {
	t.Parallel()
	direct, proxy, proxied, settled := cutStores(t, 4)
	e := &cutEnv{ctx: t.Context(), now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), direct: direct, proxied: proxied, proxy: proxy}
	for i := range n {
		round(e, i, []cutMode{cutBefore, cutAfter, cutSent}[i%3])
	}
	settled.wantReissued(t)
}

// cut arms the proxy to cut the next COMMIT as mode, runs write and fails the test unless
// exactly that COMMIT was cut and write succeeded.
func (e *cutEnv) cut(t *testing.T, mode cutMode, what string, write func() error) {
	t.Helper()
	cuts := e.proxy.cuts.Load()
	e.proxy.arm(mode)
	err := write()
	if e.proxy.take() != cutNone || e.proxy.cuts.Load() != cuts+1 {
		t.Fatalf("%s (cut %s): the proxy cut no COMMIT (%v)", what, mode, err)
	}
	if err != nil {
		t.Fatalf("%s (cut %s) = %v, want done", what, mode, err)
	}
}

// Connections that died while idle in the pool (a server restart, a firewall) are replaced: the
// next write succeeds.
func TestStalePooledConnections(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newSchemaURL(t)
	direct, err := Open(ctx, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	proxy, st := openProxied(t, u, &Config{MaxConns: 2})
	now := time.Now()
	for i := range 3 {
		c := newCutCall(fmt.Sprintf("stale:%d", i))
		if res, err := st.Reserve(ctx, c.reserveReq(now)); err != nil || !res.Reserved {
			t.Fatalf("Reserve #%d = %+v, %v, want reserved", i, res, err)
		}
		proxy.dropAll()
	}
}

// receiptsOf returns the receipts of one action, in seq order.
func receiptsOf(t *testing.T, st *Store, actionID string) []receipt.Sealed {
	t.Helper()
	var got []receipt.Sealed
	for r, err := range st.Receipts(t.Context(), store.ReceiptFilter{ActionID: actionID}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	return got
}

func seqsOf(rs []receipt.Sealed) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Seq)
	}
	return out
}

func count(evs []*store.Event, kind string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// grantApproval creates an approval for hash and grants it.
func grantApproval(t *testing.T, st *Store, hash string, now time.Time) string {
	t.Helper()
	a := &store.Approval{
		ID: "apr_" + randomHex(16), Status: store.Pending, ActionHash: hash, ActionName: "billing.charge",
		Action: json.RawMessage(`{"name":"billing.charge"}`), Agent: "agent:test", CreatedAt: now, ExpiresAt: now.Add(time.Hour),
	}
	if _, err := st.CreateApproval(t.Context(), &store.ApprovalRequest{Now: now, Approval: a}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AnswerApproval(t.Context(), &store.AnswerRequest{Now: now, ID: a.ID, Grant: true, Approver: "user:bob"}); err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// TestCutAnswer creates and grants approval requests through a proxy that cuts the COMMIT of
// each request and each answer (before forwarding it, after its reply, right after sending it): a
// request or grant reported done must be what the next transaction, on another connection, reads.
// (The soak found a grant reported done and read pending: the re-issue of an answer whose COMMIT
// never happened checked for that lost attempt again after writing its own answer row — the same
// row, by request, approver and time — and took it for the attempt, landed.)
func TestCutAnswer(t *testing.T) {
	cutRounds(t, 60, func(e *cutEnv, i int, mode cutMode) {
		a := &store.Approval{
			ID: "apr_" + randomHex(16), Status: store.Pending, ActionHash: "sha256:" + randomHex(32), ActionName: "billing.charge",
			Action: json.RawMessage(`{"name":"billing.charge"}`), Agent: "agent:test", CreatedAt: e.now, ExpiresAt: e.now.Add(time.Hour),
		}
		e.cut(t, mode, fmt.Sprintf("request %d", i), func() error {
			_, err := e.proxied.CreateApproval(e.ctx, &store.ApprovalRequest{Now: e.now, Approval: a})
			return err
		})
		if read, err := e.direct.Approval(e.ctx, a.ID); err != nil || read.Status != store.Pending {
			t.Fatalf("request %d (cut %s) reported created; another connection reads %+v, %v", i, mode, read, err)
		}
		var got *store.Approval
		e.cut(t, mode, fmt.Sprintf("answer %d", i), func() (err error) {
			got, err = e.proxied.AnswerApproval(e.ctx, &store.AnswerRequest{Now: e.now, ID: a.ID, Grant: true, Approver: "user:bob"})
			return err
		})
		if read, err := e.direct.Approval(e.ctx, a.ID); err != nil || read.Status != store.Granted || got.Status != store.Granted {
			t.Fatalf("answer %d (cut %s) reported %s; another connection reads %+v, %v", i, mode, got.Status, read, err)
		}
	})
}

// TestCutInsertsThenAppends cuts the COMMIT of writes that take the chain head, insert a row
// under a fresh id and append a record with no read in between — a delegation, a legal hold —
// three ways each, and then of their revocation and release: a write reported done must be what
// another connection reads. The re-issue of such a write inserts the very row its lost attempt
// had (same id, same values); a check for that attempt made after the insert would read the
// re-issue's own row and take it for the attempt, landed, and report a write that is not in the
// store.
func TestCutInsertsThenAppends(t *testing.T) {
	grant := []byte("subject: { agent: finance-bot }\nactions: [payments.refund]\n")
	cutRounds(t, 30, func(e *cutEnv, i int, mode cutMode) {
		if i == 0 { // a receipt for the holds to cover
			if _, err := e.direct.Reserve(e.ctx, newCutCall("charge:hold-me").reserveReq(e.now)); err != nil {
				t.Fatal(err)
			}
		}
		d := &store.Delegation{ID: "dlg_" + randomHex(16), Parent: "alice-payments", Grant: grant, CreatedBy: "alice", CreatedAt: e.now}
		e.cut(t, mode, fmt.Sprintf("delegation %d", i), func() error {
			return e.proxied.CreateDelegation(e.ctx, d, []store.Event{{Kind: store.EventDelegationCreated, Time: e.now, Payload: []byte(`{}`)}})
		})
		list, err := e.direct.Delegations(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(list, func(x *store.Delegation) bool { return x.ID == d.ID }) {
			t.Fatalf("delegation %d (cut %s) reported created; another connection does not find it", i, mode)
		}
		e.cut(t, mode, fmt.Sprintf("revocation %d", i), func() error {
			_, err := e.proxied.RevokeDelegation(e.ctx, &store.RevokeRequest{Now: e.now, ID: d.ID, By: "alice"})
			return err
		})
		if list, err = e.direct.Delegations(e.ctx); err != nil {
			t.Fatal(err)
		}
		if k := slices.IndexFunc(list, func(x *store.Delegation) bool { return x.ID == d.ID }); k < 0 || list[k].RevokedAt.IsZero() {
			t.Fatalf("revocation %d (cut %s) reported done; another connection reads the delegation unrevoked", i, mode)
		}

		var h *store.Hold
		e.cut(t, mode, fmt.Sprintf("hold %d", i), func() (err error) {
			h, err = e.proxied.PlaceHold(e.ctx, &store.HoldRequest{Now: e.now, From: 1, To: 1, Reason: fmt.Sprintf("case %d", i), By: "legal"})
			return err
		})
		holds, err := e.direct.Holds(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(holds, func(x *store.Hold) bool { return x.ID == h.ID }) {
			t.Fatalf("hold %d (cut %s) reported placed as %s; another connection does not find it", i, mode, h.ID)
		}
		e.cut(t, mode, fmt.Sprintf("release %d", i), func() error {
			_, err := e.proxied.ReleaseHold(e.ctx, &store.ReleaseRequest{Now: e.now, ID: h.ID, Reason: "closed", By: "legal"})
			return err
		})
		if holds, err = e.direct.Holds(e.ctx); err != nil {
			t.Fatal(err)
		}
		if k := slices.IndexFunc(holds, func(x *store.Hold) bool { return x.ID == h.ID }); k < 0 || holds[k].Active() {
			t.Fatalf("release %d (cut %s) reported done; another connection reads the hold active", i, mode)
		}
	})
}

// TestCutLapseResolve cuts the COMMIT of a lease's extension, of a sweeper's lapse (an effect
// written ambiguous under the head), of the human's resolution that follows and of a sweeper's
// expiry of an approval request, three ways each: each write reported done must be what another
// connection reads.
func TestCutLapseResolve(t *testing.T) {
	cutRounds(t, 30, func(e *cutEnv, i int, mode cutMode) {
		c := newCutCall(fmt.Sprintf("charge:lapse-%d", i))
		if _, err := e.direct.Reserve(e.ctx, c.reserveReq(e.now)); err != nil {
			t.Fatal(err)
		}
		until := e.now.Add(90 * time.Minute)
		e.cut(t, mode, fmt.Sprintf("extension %d", i), func() error {
			_, err := e.proxied.ExtendLease(e.ctx, &store.ExtendRequest{Now: e.now, Key: c.key, ActionID: c.actionID, Attempt: 1, Until: until})
			return err
		})
		if eff, err := e.direct.Effect(e.ctx, c.key); err != nil || !eff.LeaseExpiresAt.Equal(until) {
			t.Fatalf("extension %d (cut %s) reported done; another connection reads %+v, %v", i, mode, eff, err)
		}
		later := e.now.Add(2 * time.Hour) // past the extended lease
		e.cut(t, mode, fmt.Sprintf("lapse %d", i), func() error {
			_, _, err := e.proxied.LapseLease(e.ctx, &store.LapseRequest{Now: later, Key: c.key, ActionID: c.actionID, Attempt: 1})
			return err
		})
		if eff, err := e.direct.Effect(e.ctx, c.key); err != nil || eff.State != store.Ambiguous {
			t.Fatalf("lapse %d (cut %s) reported done; another connection reads %+v, %v", i, mode, eff, err)
		}
		e.cut(t, mode, fmt.Sprintf("resolution %d", i), func() error {
			_, err := e.proxied.Resolve(e.ctx, &store.ResolveRequest{Now: later, Key: c.key, To: store.Committed, By: "user:bob"})
			return err
		})
		if eff, err := e.direct.Effect(e.ctx, c.key); err != nil || eff.State != store.Committed || eff.ResolvedBy != "user:bob" {
			t.Fatalf("resolution %d (cut %s) reported done; another connection reads %+v, %v", i, mode, eff, err)
		}
		a := &store.Approval{
			ID: "apr_" + randomHex(16), Status: store.Pending, ActionHash: c.hash, ActionName: "billing.charge",
			Action: json.RawMessage(`{"name":"billing.charge"}`), Agent: "agent:test", CreatedAt: e.now, ExpiresAt: e.now.Add(time.Hour),
		}
		if _, err := e.direct.CreateApproval(e.ctx, &store.ApprovalRequest{Now: e.now, Approval: a}); err != nil {
			t.Fatal(err)
		}
		e.cut(t, mode, fmt.Sprintf("expiry %d", i), func() error {
			_, _, err := e.proxied.ExpireApproval(e.ctx, &store.ExpireRequest{Now: later, ID: a.ID})
			return err
		})
		if read, err := e.direct.Approval(e.ctx, a.ID); err != nil || read.Status != store.Expired {
			t.Fatalf("expiry %d (cut %s) reported done; another connection reads %+v, %v", i, mode, read, err)
		}
	})
}

// TestCutTokensAndAccounts cuts the COMMIT of the writes that take no chain head — an API
// token's creation and revocation, an approver account's creation and removal, events that
// change no state, a signed checkpoint's storing — three ways each:
// each write reported done must be what another connection reads (a revocation reported done and
// not stored would leave a token working).
func TestCutTokensAndAccounts(t *testing.T) {
	cutRounds(t, 30, func(e *cutEnv, i int, mode cutMode) {
		tk := &store.Token{ID: "tok_" + randomHex(16), Hash: "sha256:" + randomHex(32), Kind: store.TokenAgent, Agent: "billing-worker", CreatedAt: e.now}
		e.cut(t, mode, fmt.Sprintf("token %d", i), func() error { return e.proxied.CreateToken(e.ctx, tk) })
		if read, err := e.direct.TokenByHash(e.ctx, tk.Hash); err != nil || read.ID != tk.ID || !read.RevokedAt.IsZero() {
			t.Fatalf("token %d (cut %s) reported created; another connection reads %+v, %v", i, mode, read, err)
		}
		e.cut(t, mode, fmt.Sprintf("token revocation %d", i), func() error {
			_, err := e.proxied.RevokeToken(e.ctx, tk.ID, e.now.Add(time.Minute))
			return err
		})
		if read, err := e.direct.TokenByHash(e.ctx, tk.Hash); err != nil || read.RevokedAt.IsZero() {
			t.Fatalf("token revocation %d (cut %s) reported done; another connection reads %+v, %v", i, mode, read, err)
		}
		a := &store.Account{Name: fmt.Sprintf("approver-%d", i), PasswordHash: "$2a$10$" + randomHex(26), Roles: []string{"leads"}, CreatedAt: e.now}
		e.cut(t, mode, fmt.Sprintf("account %d", i), func() error { return e.proxied.CreateAccount(e.ctx, a) })
		if read, err := e.direct.Account(e.ctx, a.Name); err != nil || read.PasswordHash != a.PasswordHash {
			t.Fatalf("account %d (cut %s) reported created; another connection reads %+v, %v", i, mode, read, err)
		}
		e.cut(t, mode, fmt.Sprintf("account removal %d", i), func() error {
			_, err := e.proxied.RemoveAccount(e.ctx, a.Name)
			return err
		})
		if read, err := e.direct.Account(e.ctx, a.Name); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("account removal %d (cut %s) reported done; another connection reads %+v, %v", i, mode, read, err)
		}
		evs := []store.Event{{Kind: store.EventDelegationRejected, Time: e.now, Payload: []byte(fmt.Sprintf(`{"round":%d}`, i))},
			{Kind: store.EventDelegationRejected, Time: e.now, Payload: []byte(fmt.Sprintf(`{"round":%d,"n":2}`, i))}}
		e.cut(t, mode, fmt.Sprintf("events %d", i), func() error { return e.proxied.LogEvents(e.ctx, evs) })
		for _, ev := range evs {
			got, err := e.direct.Events(e.ctx, store.EventFilter{AfterID: ev.ID - 1, Limit: 1})
			if err != nil || len(got) != 1 || got[0].ID != ev.ID || string(got[0].Payload) != string(ev.Payload) {
				t.Fatalf("events %d (cut %s) reported logged as id %d; another connection reads %+v, %v", i, mode, ev.ID, got, err)
			}
		}
		if all, err := e.direct.Events(e.ctx, store.EventFilter{}); err != nil || count(all, store.EventDelegationRejected) != 2*(i+1) {
			t.Fatalf("after round %d (cut %s): %d events logged, want %d (each once), %v", i, mode, count(all, store.EventDelegationRejected), 2*(i+1), err)
		}
		cp := &receipt.Checkpoint{Seq: int64(i + 1), Hash: "sha256:" + randomHex(32), SignedAt: e.now, StoreID: "st_" + randomHex(16), KeyID: "key", Signature: randomHex(32)}
		e.cut(t, mode, fmt.Sprintf("checkpoint %d", i), func() error { return e.proxied.AddCheckpoint(e.ctx, cp) })
		cps, err := e.direct.Checkpoints(e.ctx)
		if err != nil || !slices.ContainsFunc(cps, func(x *receipt.Checkpoint) bool {
			return x.Seq == cp.Seq && x.Hash == cp.Hash && x.SignedAt.Equal(cp.SignedAt) && x.Signature == cp.Signature
		}) {
			t.Fatalf("checkpoint %d (cut %s) reported stored; another connection reads %d checkpoints without it, %v", i, mode, len(cps), err)
		}
	})
}

// TestCutPrune cuts the COMMIT of prunes, three ways each: each prune reported done is what
// another connection reads — the chain starting at the checkpoint it pruned below, and verifying
// from there.
func TestCutPrune(t *testing.T) {
	key, _ := storetest.SigningKey(t)
	cutRounds(t, 9, func(e *cutEnv, i int, mode cutMode) {
		at := e.now.Add(time.Duration(i) * time.Hour)
		for j := range 3 {
			c := newCutCall(fmt.Sprintf("charge:prune-%d-%d", i, j))
			if _, err := e.direct.Reserve(e.ctx, c.reserveReq(at)); err != nil {
				t.Fatal(err)
			}
			if _, err := e.direct.Record(e.ctx, c.recordReq(at, 1)); err != nil {
				t.Fatal(err)
			}
		}
		cp, err := store.SignCheckpoint(e.ctx, e.direct, key, at)
		if err != nil {
			t.Fatal(err)
		}
		var res *store.PruneResult
		e.cut(t, mode, fmt.Sprintf("prune %d", i), func() (err error) {
			res, err = e.proxied.Prune(e.ctx, &store.PruneRequest{Now: at, By: "cli:ops", BeforeSeq: cp.Seq})
			return err
		})
		rep, err := store.VerifyChain(e.ctx, e.direct)
		if err != nil || !rep.OK || rep.Start == nil || rep.Start.Seq != cp.Seq || res.Start.Seq != cp.Seq {
			t.Fatalf("prune %d (cut %s) reported the chain starting at %d; another connection verifies %+v, %v", i, mode, res.Start.Seq, rep, err)
		}
	})
}

// TestCutRequestKey cuts the COMMIT of reservations made with a request key (their own
// transaction, not a batch), three ways each, and of their replays and refusals: a keyed
// reservation reported reserved is the row another connection reads, and its key replays it
// there — the same action id, attempt and lease — from any connection; a reservation cut before
// its COMMIT that did not land is re-issued and lands once (one effect_reserved event). A replay
// writes nothing, and its cut COMMIT changes nothing. A second caller's keyed request, refused
// in_progress with its receipt, leaves its key unstored.
func TestCutRequestKey(t *testing.T) {
	cutRounds(t, 30, func(e *cutEnv, i int, mode cutMode) {
		c := newCutCall(fmt.Sprintf("charge:keyed-%d", i))
		rk := fmt.Sprintf("req-%d-%s", i, randomHex(8))
		keyed := func(c cutCall, at time.Time, rk string) *store.ReserveRequest {
			req := c.reserveReq(at)
			req.RequestKey, req.Agent = rk, "agent:test"
			return req
		}
		var first *store.ReserveResult
		e.cut(t, mode, fmt.Sprintf("keyed reservation %d", i), func() (err error) {
			first, err = e.proxied.Reserve(e.ctx, keyed(c, e.now, rk))
			return err
		})
		row, err := e.direct.Effect(e.ctx, c.key)
		if err != nil || !first.Reserved || first.Replayed || row.State != store.Executing || row.ActionID != c.actionID ||
			row.Attempt != first.Effect.Attempt || !row.LeaseExpiresAt.Equal(first.Effect.LeaseExpiresAt) {
			t.Fatalf("keyed reservation %d (cut %s) = %+v; another connection reads %+v, %v", i, mode, first, row, err)
		}
		evs, err := e.direct.Events(e.ctx, store.EventFilter{ActionID: c.actionID})
		if err != nil || count(evs, store.EventEffectReserved) != 1 {
			t.Fatalf("keyed reservation %d (cut %s): %d effect_reserved events, %v; want exactly 1", i, mode, count(evs, store.EventEffectReserved), err)
		}
		before, err := e.direct.Events(e.ctx, store.EventFilter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range []*Store{e.direct, e.proxied} {
			again := c
			again.actionID = "act_" + randomHex(16)
			var res *store.ReserveResult
			replay := func() (err error) {
				res, err = st.Reserve(e.ctx, keyed(again, e.now.Add(time.Second), rk))
				return err
			}
			if st == e.proxied {
				e.cut(t, mode, fmt.Sprintf("replay %d", i), replay)
			} else if err := replay(); err != nil {
				t.Fatal(err)
			}
			if !res.Replayed || res.Effect.ActionID != c.actionID || res.Effect.Attempt != row.Attempt || !res.Effect.LeaseExpiresAt.Equal(row.LeaseExpiresAt) {
				t.Fatalf("replay %d (cut %s) = %+v, want the reservation %+v", i, mode, res, row)
			}
		}
		if after, err := e.direct.Events(e.ctx, store.EventFilter{}); err != nil || len(after) != len(before) {
			t.Fatalf("replays %d (cut %s) wrote %d events, %v; want none", i, mode, len(after)-len(before), err)
		}
		// A second caller with its own key: refused in_progress (a receipt appended), its key not kept.
		second := c
		second.actionID = "act_" + randomHex(16)
		other := rk + "-second"
		var refusedRes *store.ReserveResult
		e.cut(t, mode, fmt.Sprintf("refused keyed reservation %d", i), func() (err error) {
			refusedRes, err = e.proxied.Reserve(e.ctx, keyed(second, e.now.Add(time.Second), other))
			return err
		})
		if refusedRes.Refusal == nil || refusedRes.Refusal.Reason != "in_progress" || len(receiptsOf(t, e.direct, second.actionID)) != 1 {
			t.Fatalf("second caller %d (cut %s) = %+v, want refused in_progress with one receipt", i, mode, refusedRes.Refusal)
		}
		elsewhere := newCutCall(fmt.Sprintf("charge:keyed-%d-other", i))
		if res, err := e.direct.Reserve(e.ctx, keyed(elsewhere, e.now, other)); err != nil || !res.Reserved || res.Replayed {
			t.Fatalf("the refused request's key %d (cut %s) reused elsewhere = %+v, %v; want reserved (it was not kept)", i, mode, res, err)
		}
	})
}

// TestCutCharge cuts the COMMIT of charged reservations, of their refusals and of the records
// that release them: a reservation and its budget charge land together or not at all, once (a
// re-issue after a commit that landed charges nothing twice), and a failed outcome's release
// lands with it — through the batch that writes records.
func TestCutCharge(t *testing.T) {
	const rounds = 30
	budget := store.Charge{Budget: "grant:ops", Metric: "cents", Amount: 100, Limit: 100 * rounds, Window: 24 * time.Hour}
	cutRounds(t, rounds, func(e *cutEnv, i int, mode cutMode) {
		c := newCutCall(fmt.Sprintf("charge:budget-%d", i))
		req := c.reserveReq(e.now)
		req.Charges = []store.Charge{budget}
		var res *store.ReserveResult
		e.cut(t, mode, fmt.Sprintf("charged reservation %d", i), func() (err error) {
			res, err = e.proxied.Reserve(e.ctx, req)
			return err
		})
		row, err := e.direct.Effect(e.ctx, c.key)
		if err != nil || !res.Reserved || row.State != store.Executing || row.ActionID != c.actionID {
			t.Fatalf("charged reservation %d (cut %s) = %+v; another connection reads %+v, %v", i, mode, res, row, err)
		}
		rows := chargesOf(t, e.direct, c.key)
		if len(rows) != 1 || rows[0].Attempt != 1 || rows[0].ActionID != c.actionID || rows[0].Amount != budget.Amount || !rows[0].ReleasedAt.IsZero() {
			t.Fatalf("charged reservation %d (cut %s): ledger rows %+v, want one held row of attempt 1", i, mode, rows)
		}
		// Every other round fails, through a record whose commit is cut: the release lands with
		// the failed outcome, or neither does.
		if i%2 == 1 {
			rec := c.recordReq(e.now.Add(time.Second), 1)
			rec.Outcome, rec.Result, rec.Receipt.Result = store.Failed, nil, receipt.Failed
			e.cut(t, mode, fmt.Sprintf("failed record %d", i), func() error {
				_, err := e.proxied.Record(e.ctx, rec)
				return err
			})
			row, err := e.direct.Effect(e.ctx, c.key)
			rows := chargesOf(t, e.direct, c.key)
			if err != nil || row.State != store.Failed || len(rows) != 1 || !rows[0].ReleasedAt.Equal(e.now.Add(time.Second)) {
				t.Fatalf("failed record %d (cut %s): effect %+v, %v; ledger %+v; want failed and released", i, mode, row, err, rows)
			}
		}
		e.now = e.now.Add(2 * time.Second)
	})
}

// TestCutChargeRefused cuts the COMMIT of a reservation its budget refuses: the refusal's
// receipt lands once, and nothing is charged or reserved.
func TestCutChargeRefused(t *testing.T) {
	budget := store.Charge{Budget: "grant:tight", Metric: "count", Amount: 1, Limit: 1, Window: time.Hour}
	cutRounds(t, 12, func(e *cutEnv, i int, mode cutMode) {
		if i == 0 {
			first := newCutCall("charge:tight-first")
			req := first.reserveReq(e.now)
			req.Charges = []store.Charge{budget}
			if res, err := e.direct.Reserve(e.ctx, req); err != nil || !res.Reserved {
				t.Fatalf("first charge = %+v, %v", res, err)
			}
		}
		c := newCutCall(fmt.Sprintf("charge:tight-%d", i))
		req := c.reserveReq(e.now.Add(time.Minute))
		req.Charges = []store.Charge{budget}
		var res *store.ReserveResult
		e.cut(t, mode, fmt.Sprintf("refused charge %d", i), func() (err error) {
			res, err = e.proxied.Reserve(e.ctx, req)
			return err
		})
		if res.Refusal == nil || res.Refusal.Reason != store.ReasonBudgetExhausted || len(receiptsOf(t, e.direct, c.actionID)) != 1 {
			t.Fatalf("refused charge %d (cut %s) = %+v, want budget_exhausted with one receipt", i, mode, res.Refusal)
		}
		if _, err := e.direct.Effect(e.ctx, c.key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("refused charge %d (cut %s): effect %v, want none", i, mode, err)
		}
		if rows := chargesOf(t, e.direct, c.key); len(rows) != 0 {
			t.Fatalf("refused charge %d (cut %s): ledger %+v, want none", i, mode, rows)
		}
	})
}

// chargesOf reads the ledger rows of one effect key.
func chargesOf(t *testing.T, st *Store, key string) []*store.ChargeRecord {
	t.Helper()
	all, err := st.Charges(t.Context(), store.ChargeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*store.ChargeRecord
	for _, r := range all {
		if r.EffectKey == key {
			out = append(out, r)
		}
	}
	return out
}
