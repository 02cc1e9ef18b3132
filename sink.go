package latch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"

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
// sink that fails is logged and never fails a call.
type Sink interface {
	Receipt(ctx context.Context, r receipt.Sealed) error
	Event(ctx context.Context, e store.Event) error
}

var noReceipt receipt.Sealed

func (g *Guard) emit(ctx context.Context, r receipt.Sealed, events []store.Event) {
	for _, s := range g.cfg.Sinks {
		for _, e := range events {
			if err := s.Event(ctx, e); err != nil {
				g.log.Warn("latch: sink refused event", "kind", e.Kind, "err", err)
			}
		}
		if r.Seq > 0 {
			if err := s.Receipt(ctx, r); err != nil {
				g.log.Warn("latch: sink refused receipt", "seq", r.Seq, "err", err)
			}
		}
	}
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
func (s *JSONLSink) Receipt(_ context.Context, r receipt.Sealed) error {
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
