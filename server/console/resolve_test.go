package console_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/store"
	"github.com/latchkit/latch/store/postgres"
	"github.com/latchkit/latch/store/sqlite"
)

// between is run once, by a store wrapper, right after the next read of one effect record: it
// is what another process does between the console's read of the record and its write.
type between struct {
	key  string
	once atomic.Pointer[func()]
}

// after runs the armed function once, when key is the record just read.
func (b *between) after(key string) {
	if key != b.key {
		return
	}
	if fn := b.once.Swap(nil); fn != nil {
		(*fn)()
	}
}

type raceSQLite struct {
	*sqlite.Store
	b *between
}

func (s *raceSQLite) Effect(ctx context.Context, key string) (*store.Effect, error) {
	e, err := s.Store.Effect(ctx, key)
	s.b.after(key)
	return e, err
}

type racePostgres struct {
	*postgres.Store
	b *between
}

func (s *racePostgres) Effect(ctx context.Context, key string) (*store.Effect, error) {
	e, err := s.Store.Effect(ctx, key)
	s.b.after(key)
	return e, err
}

// A resolve form is bound to the attempt its card showed, and the store checks that in the
// resolution's own transaction. Here the card of attempt 1 is submitted, and right after the
// console first reads the record — between any check it makes and its write — another person
// resolves attempt 1 failed and a retry leaves attempt 2 ambiguous: the form is refused 409,
// nothing is written, and attempt 2 stays ambiguous for someone who has seen it.
func TestResolveRacedByNewAttempt(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			b := &between{key: "pay:inv_race"}
			s := consoletest.Start(t, &consoletest.Options{Backend: backend, Wrap: func(st store.Store) store.Store {
				switch st := st.(type) {
				case *sqlite.Store:
					return &raceSQLite{Store: st, b: b}
				case *postgres.Store:
					return &racePostgres{Store: st, b: b}
				}
				t.Fatalf("store %T", st)
				return nil
			}})
			s.AddAccount(t, "alice", pw)
			key := s.AmbiguousCharge(t, "inv_race")
			c, _ := login(t, s, "alice")
			page := consoletest.Get(t, c, s.URL+"/attention").Body
			action, seen := consoletest.ResolveForm(page, key)
			if action == "" {
				t.Fatalf("no resolve form for %s", key)
			}
			shown, err := s.Guard.Store().Effect(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			var raced atomic.Bool
			fn := func() {
				raced.Store(true)
				if _, err := s.Guard.ResolveEffect(context.Background(), &store.ResolveRequest{Key: key, To: store.Failed, By: "cli:ops"}); err != nil {
					t.Errorf("the other resolution: %v", err)
				}
				s.AmbiguousCharge(t, "inv_race") // the retry: attempt 2, lost too
			}
			b.once.Store(&fn)
			r := consoletest.Post(t, c, s.URL+action, url.Values{"csrf": {consoletest.CSRF(page)}, "seen": {seen}, "to": {"committed"}})
			if !raced.Load() {
				t.Fatalf("the console never read %s: the race was not run", key)
			}
			if r.Status != http.StatusConflict || !strings.Contains(r.Body, "changed since your page was drawn") {
				t.Errorf("the raced form = %d, want 409 saying the effect changed: %s", r.Status, r.Body)
			}
			e, err := s.Guard.Store().Effect(t.Context(), key)
			if err != nil || e.State != store.Ambiguous || e.Attempt != 2 || e.ActionID == shown.ActionID {
				t.Errorf("after the raced form the effect is %+v, %v; want attempt 2 still ambiguous", e, err)
			}
		})
	}
}

// The resolve form is offered only to someone the resolution would not refuse, by the rule
// Guard.ResolveEffect refuses with: not to the person whose attempt it is (the agent's name, or
// the user it acted for), not to someone outside the roles the action's approvers name. Each
// card says why instead; the form sent anyway is refused 403 with the reason, and writes
// nothing. Someone entitled sees the form and resolves.
func TestResolveFormOnlyForThoseWhoMay(t *testing.T) {
	t.Parallel()
	s := consoletest.Start(t, nil)
	s.AddAccount(t, "dan", pw, "payments-leads") // the user the refund was for
	s.AddAccount(t, "bob", pw)                   // no role
	s.AddAccount(t, "alice", pw, "payments-leads")
	_, err := s.Guard.Execute(latch.WithPrincipal(t.Context(), latch.Principal{Agent: "billing-worker", User: "dan"}),
		&latch.Call{Action: "billing.refund", Arguments: json.RawMessage(`{"order_id":"ord_1","amount":100,"currency":"EUR"}`)},
		func(context.Context, json.RawMessage) (any, error) {
			return nil, errors.New("read tcp: connection reset by peer")
		})
	if !errors.Is(err, latch.ErrAmbiguous) {
		t.Fatalf("Execute = %v, want ambiguous", err)
	}
	const key = "refund:ord_1"
	alice, _ := login(t, s, "alice")
	alicePage := consoletest.Get(t, alice, s.URL+"/attention").Body
	action, seen := consoletest.ResolveForm(alicePage, key)
	if action == "" {
		t.Fatalf("alice, a payments lead, is not offered the resolve form of %s", key)
	}
	for _, c := range []struct{ name, why, reason string }{
		{"dan", "someone else must say what happened", store.ReasonSelfResolution},
		{"bob", "not among the approvers the policy names for billing.refund", store.ReasonNotEntitled},
	} {
		cl, _ := login(t, s, c.name)
		page := consoletest.Get(t, cl, s.URL+"/attention").Body
		if a, _ := consoletest.ResolveForm(page, key); a != "" || strings.Contains(page, `action="`+action+`"`) {
			t.Errorf("%s is offered the resolve form of %s", c.name, key)
		}
		if !strings.Contains(page, c.why) {
			t.Errorf("%s's card of %s does not say %q", c.name, key, c.why)
		}
		ev, rc := s.Written(t)
		r := consoletest.Post(t, cl, s.URL+action, url.Values{"csrf": {consoletest.CSRF(page)}, "seen": {seen}, "to": {"failed"}})
		if r.Status != http.StatusForbidden || !strings.Contains(r.Body, "Refused ("+c.reason+")") || !strings.Contains(r.Body, c.why) {
			t.Errorf("%s's resolution sent anyway = %d, want 403 Refused (%s) saying why: %s", c.name, r.Status, c.reason, r.Body)
		}
		if e, r := s.Written(t); e != ev || r != rc {
			t.Errorf("%s's refused resolution wrote: events %d → %d, receipts %d → %d", c.name, ev, e, rc, r)
		}
	}
	if r := consoletest.Post(t, alice, s.URL+action, url.Values{"csrf": {consoletest.CSRF(alicePage)}, "seen": {seen}, "to": {"failed"}}); r.Status != http.StatusSeeOther {
		t.Errorf("alice's resolution = %d, want a redirect: %s", r.Status, r.Body)
	}
	if e, err := s.Guard.Store().Effect(t.Context(), key); err != nil || e.State != store.Failed || e.ResolvedBy != "console:alice" {
		t.Errorf("%s = %+v, %v; want failed by console:alice", key, e, err)
	}
}
