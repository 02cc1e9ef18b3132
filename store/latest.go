package store

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"slices"

	"github.com/latchkit/latch/receipt"
)

// latestRuns gathers, from records read in any order, the last state the records assert of each
// key (the state of the highest seq that asserts one), and yields the keys in byte order. It is
// how the state check meets the table rows key by key while reading the chain once, in seq
// order, without holding every key in memory: once it holds limit keys, it writes them, sorted,
// to a temporary file (a run) and starts again; sorted yields the runs merged.
//
// A run is a sequence of entries: the key (uvarint length, bytes), the seq (varint), a flags
// byte (v1, has a state), with v1 the seq of the last v1 record (varint) and, with a state, the
// state as the codec writes it.
type latestRuns[S any] struct {
	limit int
	codec stateCodec[S]
	file  string // the runs' temporary files are latch-FILE-*
	what  string // what their errors say they are for
	cur   map[string]*latest[S]
	runs  []*os.File
	// levels[i] is the level of runs[i]: 0 for a run of held keys, L+1 for a run merged from
	// maxRuns runs of level L. Levels never grow along runs, so the runs of the last level are
	// the tail of runs.
	levels []int
	// written counts the entries written to runs at every level: what the runs cost.
	written int64
	buf     []byte
}

// latest is what the records of one key said: the last state asserted (nil when none did) and
// the seq of the record that asserted it, and whether a record of schema v1 names the key (and
// the seq of the last that does).
type latest[S any] struct {
	key   string
	seq   int64
	state *S
	v1    bool
	v1seq int64
}

// stateCodec writes a state to a run and reads it back.
type stateCodec[S any] struct {
	put func(b []byte, s *S) []byte
	get func(r *runReader) (*S, error)
}

// runLimit is how many keys latestRuns holds before it writes a run: a few MiB of keys and
// states, whatever the length of the chain.
var runLimit = 1 << 13

// newLatestRuns returns runs of codec's states holding limit keys in memory, for the state check
// (file "statecheck", what "check state") or a prune ("prune").
func newLatestRuns[S any](codec stateCodec[S], limit int, file, what string) *latestRuns[S] {
	return &latestRuns[S]{limit: limit, codec: codec, file: file, what: what, cur: map[string]*latest[S]{}}
}

// add notes a record of key at seq: the state it asserts (nil when none) and whether it is of
// schema v1.
func (l *latestRuns[S]) add(key string, seq int64, state *S, v1 bool) error {
	e := l.cur[key]
	if e == nil {
		e = &latest[S]{key: key}
		l.cur[key] = e
	}
	e.merge(seq, state, v1, seq)
	if len(l.cur) >= l.limit {
		return l.spill()
	}
	return nil
}

// merge notes a state asserted at seq (none when nil) and, with v1, a v1 record at v1seq.
func (e *latest[S]) merge(seq int64, state *S, v1 bool, v1seq int64) {
	if v1 {
		e.v1, e.v1seq = true, max(e.v1seq, v1seq)
	}
	if state != nil && seq > e.seq {
		e.seq, e.state = seq, state
	}
}

// spill writes the keys held, sorted, to a new run of level 0; whenever maxRuns runs share a
// level, it merges them into one run of the next level. The files open at once stay few however
// long the chain (maxRuns a level, a level per factor of maxRuns), and each key is written once a
// level — some log(keys) times in all — where merging every run into the one before would write
// the keys of the first runs again at every merge, a cost that grows with the square of the
// chain.
func (l *latestRuns[S]) spill() error {
	if len(l.cur) == 0 {
		return nil
	}
	err := l.writeRun(0, func(yield func(*latest[S], error) bool) {
		for _, k := range slices.Sorted(maps.Keys(l.cur)) {
			if !yield(l.cur[k], nil) {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	clear(l.cur)
	for {
		n := len(l.runs)
		if n < maxRuns || l.levels[n-1] != l.levels[n-maxRuns] {
			return nil
		}
		level := l.levels[n-1]
		old := slices.Clone(l.runs[n-maxRuns:])
		l.runs, l.levels = l.runs[:n-maxRuns], l.levels[:n-maxRuns]
		err = l.writeRun(level+1, mergeRuns(old, l.codec, l.what))
		for _, f := range old {
			f.Close()
			os.Remove(f.Name())
		}
		if err != nil {
			return err
		}
	}
}

// maxRuns is how many runs of one level latestRuns keeps before merging them into one.
const maxRuns = 64

// writeRun writes entries, in key order, to a new run of level, rewound for reading.
func (l *latestRuns[S]) writeRun(level int, entries iter.Seq2[*latest[S], error]) error {
	f, err := os.CreateTemp("", "latch-"+l.file+"-*")
	if err != nil {
		return fmt.Errorf("%s: a temporary run: %w", l.what, err)
	}
	l.runs, l.levels = append(l.runs, f), append(l.levels, level)
	w := bufio.NewWriterSize(f, 64<<10)
	for e, err := range entries {
		if err != nil {
			return err
		}
		b := binary.AppendUvarint(l.buf[:0], uint64(len(e.key)))
		b = append(b, e.key...)
		b = binary.AppendVarint(b, e.seq)
		var flags byte
		if e.v1 {
			flags |= 1
		}
		if e.state != nil {
			flags |= 2
		}
		b = append(b, flags)
		if e.v1 {
			b = binary.AppendVarint(b, e.v1seq)
		}
		if e.state != nil {
			b = l.codec.put(b, e.state)
		}
		l.buf = b
		l.written++
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("%s: write a temporary run: %w", l.what, err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("%s: write a temporary run: %w", l.what, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("%s: read a temporary run: %w", l.what, err)
	}
	return nil
}

// close removes the runs.
func (l *latestRuns[S]) close() {
	for _, f := range l.runs {
		f.Close()
		os.Remove(f.Name())
	}
	l.runs, l.levels = nil, nil
}

// sorted yields what add gathered, one entry a key, in byte order of key. It is called once.
func (l *latestRuns[S]) sorted() iter.Seq2[*latest[S], error] {
	return func(yield func(*latest[S], error) bool) {
		if len(l.runs) == 0 {
			for _, k := range slices.Sorted(maps.Keys(l.cur)) {
				if !yield(l.cur[k], nil) {
					return
				}
			}
			return
		}
		if err := l.spill(); err != nil {
			yield(nil, err)
			return
		}
		for e, err := range mergeRuns(l.runs, l.codec, l.what) {
			if !yield(e, err) || err != nil {
				return
			}
		}
	}
}

// mergeRuns yields the entries of runs (each in key order, each key once) in key order, each
// key once: what the runs said of it, merged.
func mergeRuns[S any](runs []*os.File, codec stateCodec[S], what string) iter.Seq2[*latest[S], error] {
	return func(yield func(*latest[S], error) bool) {
		h := make(runHeap[S], 0, len(runs))
		for _, f := range runs {
			r := &runReader{r: bufio.NewReaderSize(f, 64<<10)}
			switch e, err := readLatest(r, codec, what); {
			case err == io.EOF:
			case err != nil:
				yield(nil, err)
				return
			default:
				h = append(h, &runHead[S]{r: r, e: e})
			}
		}
		heap.Init(&h)
		var cur *latest[S]
		for len(h) > 0 {
			top := h[0]
			e := top.e
			switch next, err := readLatest(top.r, codec, what); {
			case err == io.EOF:
				heap.Pop(&h)
			case err != nil:
				yield(nil, err)
				return
			default:
				top.e = next
				heap.Fix(&h, 0)
			}
			if cur != nil && cur.key == e.key {
				cur.merge(e.seq, e.state, e.v1, e.v1seq)
				continue
			}
			if cur != nil && !yield(cur, nil) {
				return
			}
			cur = e
		}
		if cur != nil {
			yield(cur, nil)
		}
	}
}

// runReader reads the entries of a run.
type runReader struct {
	r   *bufio.Reader
	err error
}

func (r *runReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(r.r)
	r.err = err
	return v
}

func (r *runReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(r.r)
	r.err = err
	return v
}

func (r *runReader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	b := make([]byte, n)
	_, r.err = io.ReadFull(r.r, b)
	return string(b)
}

func (r *runReader) byte() byte {
	if r.err != nil {
		return 0
	}
	b, err := r.r.ReadByte()
	r.err = err
	return b
}

// readLatest reads one entry; io.EOF when the run has no more.
func readLatest[S any](r *runReader, codec stateCodec[S], what string) (*latest[S], error) {
	if _, err := r.r.Peek(1); err == io.EOF {
		return nil, io.EOF
	}
	e := &latest[S]{key: r.str(), seq: r.varint()}
	flags := r.byte()
	e.v1 = flags&1 != 0
	if e.v1 {
		e.v1seq = r.varint()
	}
	if flags&2 != 0 && r.err == nil {
		s, err := codec.get(r)
		if err != nil {
			return nil, err
		}
		e.state = s
	}
	if err := r.err; err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // the run ended inside an entry
		}
		return nil, fmt.Errorf("%s: read a temporary run: %w", what, err)
	}
	return e, nil
}

// runHead is a run's next entry, in the merge's heap.
type runHead[S any] struct {
	r *runReader
	e *latest[S]
}

type runHeap[S any] []*runHead[S]

func (h runHeap[S]) Len() int           { return len(h) }
func (h runHeap[S]) Less(i, j int) bool { return h[i].e.key < h[j].e.key }
func (h runHeap[S]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap[S]) Push(x any)        { *h = append(*h, x.(*runHead[S])) }
func (h *runHeap[S]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// The codecs of the two states the merged check reads.

var effectCodec = stateCodec[receipt.EffectState]{
	put: func(b []byte, s *receipt.EffectState) []byte {
		for _, v := range []string{s.State, s.Holder, s.ResultHash, s.ResolvedBy} {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
		b = binary.AppendVarint(b, int64(s.Attempt))
		if s.Conflict {
			return append(b, 1)
		}
		return append(b, 0)
	},
	get: func(r *runReader) (*receipt.EffectState, error) {
		s := &receipt.EffectState{State: r.str(), Holder: r.str(), ResultHash: r.str(), ResolvedBy: r.str()}
		s.Attempt = int(r.varint())
		s.Conflict = r.byte() == 1
		return s, r.err
	},
}

var approvalCodec = stateCodec[receipt.ApprovalState]{
	put: func(b []byte, s *receipt.ApprovalState) []byte {
		for _, v := range []string{s.Status, s.Approver} {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
		return b
	},
	get: func(r *runReader) (*receipt.ApprovalState, error) {
		return &receipt.ApprovalState{Status: r.str(), Approver: r.str()}, r.err
	},
}
