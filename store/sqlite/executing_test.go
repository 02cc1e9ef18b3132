package sqlite

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// reserveKey reserves callKey(i) for a minute from now, as protectedCall's first half does.
func reserveKey(t *testing.T, s *Store, i int, now time.Time) {
	t.Helper()
	key := callKey(i)
	res, err := s.Reserve(t.Context(), &store.ReserveRequest{Now: now, ActionID: fmt.Sprintf("act_%032d", i),
		Action: "billing.charge", ActionHash: "sha256:" + strings.Repeat("ab", 32), EffectKey: key, Lease: time.Minute})
	if err != nil || !res.Reserved {
		t.Fatalf("Reserve(%s) = %+v, %v", key, res, err)
	}
}

// recordKey records callKey(i) committed, with its receipt.
func recordKey(t *testing.T, s *Store, i int, now time.Time) {
	t.Helper()
	act := fmt.Sprintf("act_%032d", i)
	rec, err := s.Record(t.Context(), &store.RecordRequest{Now: now, EffectKey: callKey(i), ActionID: act,
		Attempt: 1, Outcome: store.Committed, Receipt: &receipt.Receipt{ReceiptID: fmt.Sprintf("rcp_%032x", i), ActionID: act,
			Action: "billing.charge", ActionHash: "sha256:" + strings.Repeat("ab", 32), Arguments: json.RawMessage(`{}`),
			Principal: receipt.Principal{Agent: "billing-agent"}, Environment: "production", Decision: "allow",
			EffectKey: callKey(i), Attempt: 1, Result: receipt.Committed, StartedAt: now, FinishedAt: now,
			PolicyHash: "sha256:" + strings.Repeat("cd", 32), Mode: "enforce"}})
	if err != nil || rec.Effect == nil || rec.Effect.State != store.Committed {
		t.Fatalf("Record(%s) = %+v, %v", callKey(i), rec, err)
	}
}

// moveMark moves s's executing mark now, as its writer has it moved after executingMarkRows
// rows.
func moveMark(t *testing.T, s *Store) {
	t.Helper()
	if err := s.moveMark(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// markFrom reads where the executing mark stands.
func markFrom(t *testing.T, s *Store) int64 {
	t.Helper()
	var from int64
	writerQuery(t, s, `SELECT from_event FROM executing_window`, &from)
	return from
}

// awaitMark waits until the executing mark has moved to event id past or beyond: the writer has
// it moved in the background.
func awaitMark(t *testing.T, s *Store, past int64) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		from := markFrom(t, s)
		if from >= past {
			return from
		}
		if time.Now().After(deadline) {
			t.Fatalf("the executing mark stands at event %d, want it moved to %d or beyond", from, past)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// keysOf lists the keys of effects.
func keysOf(effects []*store.Effect) []string {
	keys := []string{}
	for _, e := range effects {
		keys = append(keys, e.Key)
	}
	return keys
}

// checkExecutingReads compares what Effects returns for the executing, ambiguous and unsettled
// effects with a scan of the whole effects table, and the executing keys with want (when
// given: none skips that check, an empty slice wants none).
func checkExecutingReads(t *testing.T, s *Store, want ...int) {
	t.Helper()
	db := rawDB(t, s.path)
	scan := func(where string) []string {
		keys := []string{}
		for _, r := range dump(t, db, `SELECT effect_key FROM effects NOT INDEXED WHERE `+where+` ORDER BY effect_key`) {
			keys = append(keys, r[0].(string))
		}
		return keys
	}
	for _, c := range []struct {
		f     store.EffectFilter
		where string
	}{
		{store.EffectFilter{State: store.Executing}, `state = 'executing'`},
		{store.EffectFilter{State: store.Ambiguous}, `state = 'ambiguous'`},
		{store.EffectFilter{Unsettled: true}, `state IN ('ambiguous', 'executing') OR conflict <> ''`},
	} {
		got, err := s.Effects(t.Context(), c.f)
		if err != nil {
			t.Fatalf("Effects(%+v): %v", c.f, err)
		}
		if scanned := scan(c.where); !slices.Equal(keysOf(got), scanned) {
			t.Errorf("Effects(%+v) = %q; a scan of the table finds %q", c.f, keysOf(got), scanned)
		}
	}
	if want == nil {
		return
	}
	got, err := s.Effects(t.Context(), store.EffectFilter{State: store.Executing})
	if err != nil {
		t.Fatal(err)
	}
	wantKeys := []string{}
	for _, i := range want {
		wantKeys = append(wantKeys, callKey(i))
	}
	slices.Sort(wantKeys)
	if !slices.Equal(keysOf(got), wantKeys) {
		t.Errorf("executing effects = %q, want %q", keysOf(got), wantKeys)
	}
}

// parked lists executing_parked.
func parked(t *testing.T, s *Store) []string {
	t.Helper()
	keys := []string{}
	for _, r := range dump(t, rawDB(t, s.path), `SELECT effect_key FROM executing_parked ORDER BY effect_key`) {
		keys = append(keys, r[0].(string))
	}
	return keys
}

// TestExecutingEffectsAcrossTheMark: an executing effect is found whether its reservation is
// before the executing mark (parked when the mark moved) or after it (named by an event row
// since), by a second writer's reads as by its own; one that settles leaves every read at once
// and executing_parked at the next move; and the reads always agree with a scan of the table.
func TestExecutingEffectsAcrossTheMark(t *testing.T) {
	t.Parallel()
	url := backend.New(t) + "?synchronous=normal"
	s := open(t, url, nil)
	other := open(t, url, nil) // another writer of the same file, as another process is
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	reserveKey(t, s, 0, now)
	checkExecutingReads(t, s, 0)
	if p := parked(t, s); len(p) != 0 {
		t.Fatalf("executing_parked = %q before the mark moved, want it empty", p)
	}
	moveMark(t, s)
	if p := parked(t, s); !slices.Equal(p, []string{callKey(0)}) {
		t.Fatalf("executing_parked = %q after the mark moved, want %q", p, callKey(0))
	}
	reserveKey(t, other, 1, now) // after the mark, by the other writer
	checkExecutingReads(t, s, 0, 1)
	checkExecutingReads(t, other, 0, 1)

	recordKey(t, s, 0, now) // settles a parked effect: gone from the reads before the next move
	checkExecutingReads(t, other, 1)
	moveMark(t, other)
	if p := parked(t, s); !slices.Equal(p, []string{callKey(1)}) {
		t.Fatalf("executing_parked = %q after the second move, want only %q", p, callKey(1))
	}
	checkExecutingReads(t, s, 1)

	// A lease that lapses: the next reservation of the key writes the effect ambiguous, which
	// effects_attention holds.
	later := now.Add(2 * time.Minute)
	res, err := s.Reserve(t.Context(), &store.ReserveRequest{Now: later, ActionID: "act_late", Action: "billing.charge",
		ActionHash: "sha256:" + strings.Repeat("ab", 32), EffectKey: callKey(1), Lease: time.Minute})
	if err != nil || res.Reserved || res.Effect == nil || res.Effect.State != store.Ambiguous {
		t.Fatalf("Reserve after the lease lapsed = %+v, %v; want refused, the effect ambiguous", res, err)
	}
	checkExecutingReads(t, s, []int{}...)

	// The writer has the mark moved once it has appended executingMarkRows rows; a reservation
	// made meanwhile is found on either side of it.
	from0 := markFrom(t, s)
	reserveKey(t, s, 5, now)
	for i := 10; i < 10+executingMarkRows; i++ { // two rows a call: the mark moves at least once
		reserveKey(t, s, i, now)
		recordKey(t, s, i, now)
		if i == 10+executingMarkRows/2 {
			reserveKey(t, s, 6, now)
		}
	}
	awaitMark(t, s, from0+1)
	checkExecutingReads(t, s, 5, 6)
	if p := parked(t, s); !slices.Contains(p, callKey(5)) {
		t.Errorf("executing_parked = %q after the writer's move, want it to hold %q", p, callKey(5))
	}
}

// TestExecutingUnnamedRefused: a write that would make an effect executing without an event row
// naming it — so that no read could find it once settled reads stop scanning — is refused, and
// nothing of it is written.
func TestExecutingUnnamedRefused(t *testing.T) {
	t.Parallel()
	s := open(t, backend.New(t), nil)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	w := &store.EffectWrite{Next: store.Effect{Key: "charge:unnamed", State: store.Executing, Attempt: 1, ActionID: "act_1",
		Action: "billing.charge", ActionHash: "sha256:" + strings.Repeat("ab", 32), LeaseExpiresAt: now.Add(time.Minute),
		CreatedAt: now, UpdatedAt: now}}
	other := store.NewEvent(store.EventActionProposed, now, "act_1", "charge:another", "", nil)
	err := s.write(t.Context(), func(t *txn) error {
		_, _, err := t.apply(w, nil, []store.Event{other}, now, nil)
		return err
	})
	if !errors.Is(err, errExecutingUnnamed) {
		t.Fatalf("apply of an executing effect without its event = %v, want errExecutingUnnamed", err)
	}
	if _, err := s.Effect(t.Context(), "charge:unnamed"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Effect after the refused write: %v, want ErrNotFound", err)
	}
	if evs, err := s.Events(t.Context(), store.EventFilter{}); err != nil || len(evs) != 0 {
		t.Errorf("Events after the refused write = %v, %v; want none", evs, err)
	}
	// With its event, the same write is made.
	named := store.NewEvent(store.EventEffectReserved, now, "act_1", "charge:unnamed", "", nil)
	if err := s.write(t.Context(), func(t *txn) error {
		_, _, err := t.apply(w, nil, []store.Event{named}, now, nil)
		return err
	}); err != nil {
		t.Fatalf("apply with the effect's event: %v", err)
	}
	checkExecutingReads(t, s)
	got, err := s.Effects(t.Context(), store.EffectFilter{State: store.Executing})
	if err != nil || !slices.Equal(keysOf(got), []string{"charge:unnamed"}) {
		t.Errorf("executing effects = %q, %v; want charge:unnamed", keysOf(got), err)
	}
}

// TestExecutingParkedByMigration: the migration to schema 24 parks the effects executing at
// schema 23, so that a reservation made before it is still found once its event rows lie
// before the mark; ambiguous effects and outcome conflicts move to effects_attention.
func TestExecutingParkedByMigration(t *testing.T) {
	t.Parallel()
	url := backend.New(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	old := openAtVersion(t, url, executingWindowVersion-1)
	reserveKey(t, old, 0, now)
	reserveKey(t, old, 1, now)
	protectedCall(t, old, 2, now)
	// Effect 1's lease lapses: ambiguous.
	if res, err := old.Reserve(t.Context(), &store.ReserveRequest{Now: now.Add(2 * time.Minute), ActionID: "act_late",
		Action: "billing.charge", ActionHash: "sha256:" + strings.Repeat("ab", 32), EffectKey: callKey(1), Lease: time.Minute}); err != nil || res.Reserved {
		t.Fatalf("Reserve after the lease lapsed = %+v, %v", res, err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	s := open(t, url, nil)
	if v, err := schemaVersion(t.Context(), s.r); err != nil || v < executingWindowVersion {
		t.Fatalf("schema version after the migration = %d, %v", v, err)
	}
	if p := parked(t, s); !slices.Equal(p, []string{callKey(0)}) {
		t.Errorf("executing_parked after the migration = %q, want %q", p, callKey(0))
	}
	checkExecutingReads(t, s, 0)
	amb, err := s.Effects(t.Context(), store.EffectFilter{State: store.Ambiguous})
	if err != nil || !slices.Equal(keysOf(amb), []string{callKey(1)}) {
		t.Errorf("ambiguous effects after the migration = %q, %v; want %q", keysOf(amb), err, callKey(1))
	}
}

// TestExecutingMarkWithTwoWriters: with the rows of two writers past the mark, neither knows on
// its own which effects are executing; the move is made from a snapshot on a reader, in the
// background, and the effects left executing by both are found, parked, once it has.
func TestExecutingMarkWithTwoWriters(t *testing.T) {
	t.Parallel()
	url := backend.New(t) + "?synchronous=normal"
	a, b := open(t, url, nil), open(t, url, nil)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	from0 := markFrom(t, a)
	reserveKey(t, a, 1, now)
	reserveKey(t, b, 2, now)
	for i := 10; i < 10+executingMarkRows; i++ { // interleaved: every move sees the other's rows
		w := a
		if i%2 == 1 {
			w = b
		}
		reserveKey(t, w, i, now)
		recordKey(t, w, i, now)
	}
	awaitMark(t, a, from0+1)
	checkExecutingReads(t, a, 1, 2)
	checkExecutingReads(t, b, 1, 2)
	// The two effects left executing are parked. Each writer's move may also have caught, in its
	// snapshot, the call then in flight, settled since: a key parked for nothing, which reads
	// look up and pass over (checked above) and the next move drops.
	p := parked(t, a)
	if !slices.Contains(p, callKey(1)) || !slices.Contains(p, callKey(2)) || len(p) > 4 {
		t.Errorf("executing_parked = %q, want the two effects left executing, and at most a call in flight at each writer's move", p)
	}
	for _, k := range p {
		if k == callKey(1) || k == callKey(2) {
			continue
		}
		if e, err := a.Effect(t.Context(), k); err != nil || e.State == store.Executing {
			t.Errorf("executing_parked holds %s (%+v, %v) beside the two effects left executing: want it settled since the move", k, e, err)
		}
	}
}

// TestCovers: the writer moves the mark itself only when its own rows hold every id past it.
func TestCovers(t *testing.T) {
	t.Parallel()
	own := []idRange{{1, 4}, {4, 5}, {7, 9}}
	for _, c := range []struct {
		from, end int64
		want      bool
	}{
		{1, 5, true}, {2, 4, true}, {5, 5, true}, {1, 6, false}, {5, 7, false}, {7, 9, true}, {8, 9, true},
		{7, 10, false}, {0, 2, false}, {3, 8, false},
	} {
		if got := covers(own, c.from, c.end); got != c.want {
			t.Errorf("covers(%v, %d, %d) = %v, want %v", own, c.from, c.end, got, c.want)
		}
	}
	if !covers(nil, 3, 3) || covers(nil, 3, 4) {
		t.Error("covers of no ranges: want true only for no ids")
	}
}
