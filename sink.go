package latch

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

// Receipt is the receipt of one call as the caller sees it: the document, its chain hash, and
// the value the executor returned (nil unless it ran in this call).
type Receipt struct {
	receipt.Receipt
	Hash  string
	Doc   []byte // the canonical document the hash covers
	Value any
}

// newReceipt returns the receipt as the store sealed it (the planner completed a refusal's
// result and error, the store its seq and prev_hash), or nil when none was written. A store
// that does not hand back the sealed document has it read back from the stored bytes.
func newReceipt(doc *receipt.Receipt, sealed receipt.Sealed, value any) *Receipt {
	if sealed.Seq == 0 {
		return nil
	}
	if doc == nil || doc.Seq != sealed.Seq {
		var err error
		if doc, err = receipt.Parse(sealed.Doc); err != nil {
			return nil // unreachable: the document was written by receipt.Seal
		}
	}
	return &Receipt{Receipt: *doc, Hash: sealed.Hash, Doc: sealed.Doc, Value: value}
}

// Sink receives receipts and events after they are committed. The store is authoritative: a
// sink never fails, stalls or aborts a call. Each sink is fed, in commit order, by its own
// goroutine: a call waits for its delivery at most SinkWait, and not at all while the sink is
// behind; a delivery gets a context that ends after SinkTimeout; an error or a panic is logged
// and the next delivery goes on; what does not fit in a backlog of SinkBuffer items is dropped
// and logged. Guard.Close delivers what is queued (for at most SinkTimeout) before it returns.
//
// Receipt gets the receipt as written: its decoded document, its canonical bytes (Doc) and its
// hash. Value is nil: what an executor returned stays with its caller.
type Sink interface {
	Receipt(ctx context.Context, r *Receipt) error
	Event(ctx context.Context, e store.Event) error
}

// Sink delivery bounds (see Sink).
const (
	SinkWait    = 50 * time.Millisecond
	SinkTimeout = 5 * time.Second
	SinkBuffer  = 4096
)

// delivery is one emit's receipt and events for one sink.
type delivery struct {
	rc     *Receipt
	events []store.Event
	done   chan struct{}
}

// sinkWorker feeds one sink from its queue.
type sinkWorker struct {
	sink    Sink
	log     *slog.Logger
	obs     observers
	queue   chan *delivery
	stopped chan struct{}
	behind  atomic.Bool // a call stopped waiting for it: it is behind until its queue empties
	dropped atomic.Int64
}

// sinks is the guard's sink workers; nil when it has no sinks.
type sinks struct {
	mu      sync.RWMutex
	closed  bool
	workers []*sinkWorker
}

func newSinks(list []Sink, log *slog.Logger, obs observers) *sinks {
	if len(list) == 0 {
		return nil
	}
	ss := &sinks{}
	for _, s := range list {
		w := &sinkWorker{sink: s, log: log, obs: obs, queue: make(chan *delivery, SinkBuffer), stopped: make(chan struct{})}
		ss.workers = append(ss.workers, w)
		go w.run()
	}
	return ss
}

func (w *sinkWorker) run() {
	defer close(w.stopped)
	for d := range w.queue {
		w.deliver(d)
		close(d.done)
		if len(w.queue) == 0 {
			w.behind.Store(false)
		}
	}
}

// deliver hands one delivery to the sink, bounded by SinkTimeout, recovering a panic.
func (w *sinkWorker) deliver(d *delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), SinkTimeout)
	defer cancel()
	for _, e := range d.events {
		w.call("event", e.Kind, func() error { return w.sink.Event(ctx, e) })
	}
	if d.rc != nil {
		w.call("receipt", strconv.FormatInt(d.rc.Seq, 10), func() error { return w.sink.Receipt(ctx, d.rc) })
	}
}

func (w *sinkWorker) call(what, which string, f func() error) {
	defer func() {
		if r := recover(); r != nil {
			w.log.Error("latch: sink panicked", "sink", fmt.Sprintf("%T", w.sink), what, which, "panic", fmt.Sprint(r))
			w.obs.sinkFailed(w.sink, "panic")
		}
	}()
	if err := f(); err != nil {
		w.log.Warn("latch: sink refused "+what, "sink", fmt.Sprintf("%T", w.sink), what, which, "err", err)
		w.obs.sinkFailed(w.sink, "error")
	}
}

// send queues d and waits for it at most SinkWait, unless the sink is already behind.
func (w *sinkWorker) send(d *delivery) {
	select {
	case w.queue <- d:
	default:
		w.obs.sinkFailed(w.sink, "dropped")
		if n := w.dropped.Add(1); n == 1 || n%1000 == 0 {
			w.log.Error("latch: sink backlog full: receipts and events dropped (the store keeps them)",
				"sink", fmt.Sprintf("%T", w.sink), "dropped", n)
		}
		return
	}
	if w.behind.Load() {
		return
	}
	t := time.NewTimer(SinkWait)
	defer t.Stop()
	select {
	case <-d.done:
	case <-t.C:
		w.behind.Store(true)
		w.log.Warn("latch: sink is slow: calls no longer wait for it", "sink", fmt.Sprintf("%T", w.sink))
	}
}

// emit hands what a transaction committed to every sink.
func (ss *sinks) emit(rc *Receipt, events []store.Event) {
	if ss == nil || (rc == nil && len(events) == 0) {
		return
	}
	if rc != nil {
		c := *rc
		c.Value = nil
		rc = &c
	}
	ss.mu.RLock()
	defer ss.mu.RUnlock()
	if ss.closed {
		return
	}
	for _, w := range ss.workers {
		w.send(&delivery{rc: rc, events: events, done: make(chan struct{})})
	}
}

// close stops accepting deliveries and waits, at most SinkTimeout in all, for the queued ones.
func (ss *sinks) close() {
	if ss == nil {
		return
	}
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return
	}
	ss.closed = true
	for _, w := range ss.workers {
		close(w.queue)
	}
	ss.mu.Unlock()
	deadline := time.NewTimer(SinkTimeout)
	defer deadline.Stop()
	for _, w := range ss.workers {
		select {
		case <-w.stopped:
		case <-deadline.C:
			w.log.Error("latch: sink did not finish its deliveries before the guard closed", "sink", fmt.Sprintf("%T", w.sink))
			return
		}
	}
}

// emit hands a committed receipt (nil: none) and events to the guard's sinks.
func (g *Guard) emit(_ context.Context, rc *Receipt, events []store.Event) {
	g.sinks.emit(rc, events)
}

// JSONLSink appends receipts and events to a file as JSON Lines: {"receipt": doc, "hash": …}
// and {"event": …}. It is safe for concurrent use.
type JSONLSink struct {
	mu sync.Mutex
	f  *os.File
}

// NewJSONLSink opens (creating or appending to) the file at path.
func NewJSONLSink(path string) (*JSONLSink, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("latch: open sink: %w", err)
	}
	return &JSONLSink{f: f}, nil
}

// Receipt appends a receipt line.
func (s *JSONLSink) Receipt(_ context.Context, r *Receipt) error {
	return s.write(map[string]any{"receipt": json.RawMessage(r.Doc), "hash": r.Hash})
}

// Event appends an event line.
func (s *JSONLSink) Event(_ context.Context, e store.Event) error {
	line := map[string]any{"id": e.ID, "kind": e.Kind, "at": e.Time.UTC().Format(receipt.TimeFormat),
		"action_id": e.ActionID, "effect_key": e.EffectKey, "approval_id": e.ApprovalID}
	if len(e.Payload) > 0 {
		line["payload"] = json.RawMessage(e.Payload)
	}
	return s.write(map[string]any{"event": line})
}

func (s *JSONLSink) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err = s.f.Write(append(b, '\n'))
	return err
}

// Close closes the file.
func (s *JSONLSink) Close() error { return s.f.Close() }
