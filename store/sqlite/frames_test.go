package sqlite

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"
)

// walPages reads the frames of a WAL file written since it was last reset: the number of each
// frame's page, in order. Frames whose salt is not the header's are left over from before the
// reset and end the log, as they do for SQLite.
func walPages(t *testing.T, path string) []uint32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const header, frameHeader = 32, 24
	if len(b) < header {
		t.Fatalf("%s: %d bytes, want a WAL header", path, len(b))
	}
	pageSize := int(binary.BigEndian.Uint32(b[8:12]))
	salt := b[16:24]
	var pages []uint32
	for off := header; off+frameHeader+pageSize <= len(b); off += frameHeader + pageSize {
		f := b[off : off+frameHeader]
		if string(f[8:16]) != string(salt) {
			break
		}
		pages = append(pages, binary.BigEndian.Uint32(f[0:4]))
	}
	return pages
}

// TestFramesByBTree names the B-trees a protected call writes on SQLite and how many pages of
// each it commits to the log, from the log itself: each frame's page number, and the B-tree that
// page belongs to (dbstat). docs/performance.md#each-index-and-the-query-it-serves lists each of
// these B-trees and the query it serves; a B-tree that appears here and not there, or one that
// comes to cost more pages a call, fails this test until the two are brought together.
func TestFramesByBTree(t *testing.T) {
	t.Parallel()
	// Two event rows a call: the writer moves the executing mark (executingMarkRows) once
	// among the calls measured, and what that move writes is counted with them. The calls'
	// frames stay below wal_autocheckpoint, which would start the log over.
	const warm, calls = 240, 400
	if executingMarkRows <= 2*warm || executingMarkRows > 2*(warm+calls) || calls*20 >= walCheckpointPages || spanReceipts <= warm || spanReceipts > warm+calls {
		t.Fatal("the calls would not move the mark once or complete a span of receipts, or would reach wal_autocheckpoint")
	}
	s := warmStore(t, latestVersion(), warm)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	from := markFrom(t, s)
	for i := warm; i < warm+calls; i++ {
		protectedCall(t, s, i, now)
	}
	awaitMark(t, s, from+1) // the move runs in the background: its write is counted once made
	pages := walPages(t, s.path+"-wal")
	if len(pages) == 0 {
		t.Fatal("no frames in the log after 200 calls")
	}

	owner := map[uint32]string{}
	rows, err := s.r.QueryContext(t.Context(), `SELECT pageno, name FROM dbstat`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p uint32
		var name string
		if err := rows.Scan(&p, &name); err != nil {
			t.Fatal(err)
		}
		owner[p] = name
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	owner[1] = "page 1" // the database header and the root of sqlite_schema: written when the file grows

	frames := map[string]int{}
	for _, p := range pages {
		name, ok := owner[p]
		if !ok {
			t.Fatalf("frame of page %d, which no B-tree holds", p)
		}
		frames[name]++
	}
	perCall := func(name string) float64 { return float64(frames[name]) / calls }
	var report string
	for _, name := range slices.Sorted(maps.Keys(frames)) {
		report += fmt.Sprintf("\n  %-22s %5.2f", name, perCall(name))
	}
	t.Logf("frames a protected call commits, by B-tree (%.2f in all):%s", float64(len(pages))/calls, report)

	// Each B-tree a call writes, with the pages a call commits to it at most: one a commit for a
	// B-tree both commits write (two), one for one the record alone writes, and what page splits
	// add on these calls (docs/performance.md).
	want := map[string]float64{
		"effects":           3.3, // the reservation inserts it, the record settles it; random keys split leaves
		"events":            2.5, // one row each commit, appended
		"events_action_id":  2.6,
		"events_effect_key": 2.6,
		"receipts":          1.7, // the record's receipt, appended; a page holds two or three
		"chain_head":        1.0,
		"page 1":            1.0,
		// The executing mark's move, once in some 1,000 calls (executing.go): no call writes them.
		"executing_window": 0.02,
		"executing_parked": 0.02,
		// The span of 512 receipts the calls complete (spans.go): written by one call in 512.
		"receipt_spans":              0.02,
		"receipt_spans_max_finished": 0.02,
	}
	for name := range frames {
		max, ok := want[name]
		switch {
		case !ok:
			t.Errorf("a protected call writes B-tree %s (%.2f pages a call), which is not among those docs/performance.md justifies", name, perCall(name))
		case perCall(name) > max:
			t.Errorf("a protected call commits %.2f pages of %s, want at most %.1f", perCall(name), name, max)
		}
	}
	if frames["executing_window"] == 0 {
		t.Errorf("the executing mark did not move in %d calls: want one move every %d event rows", calls, executingMarkRows)
	}
	if frames["receipt_spans"] == 0 {
		t.Errorf("no span of receipts written in %d calls past %d: want one every %d receipts", calls, warm, spanReceipts)
	}
	for _, name := range []string{"effects", "events", "events_action_id", "events_effect_key", "receipts", "chain_head"} {
		if frames[name] < calls {
			t.Errorf("%s: %d frames for %d calls, want at least one a call: the measure is broken", name, frames[name], calls)
		}
	}
}
