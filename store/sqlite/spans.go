package sqlite

import "fmt"

// The receipts of a time window, without an index entry a receipt (migrations/0026_receipt_spans.sql).
//
// `latch stats --since` and the windows of GET /v1/stats read the receipts that finished at or
// after a time. An index on finished_at cost every call a page; since schema 26 the chain is
// summarized instead in spans of spanReceipts receipts, each with the latest finished_at among
// its receipts (and its first seq, so that a span is read as written whatever the size of
// later ones). The receipt whose seq ends a span writes the span in its own
// transaction, so every span the chain has completed is in receipt_spans; a window reads the
// receipts of the spans whose latest finished_at is in it and those after the last span, and
// keeps the receipts whose finished_at is in it. A receipt's finished_at follows the chain's
// order only roughly — calls finish out of order, hosts' clocks differ — and a span that holds
// one late receipt is read whole: what a window reads is bounded by the spans it touches, never
// by the chain's length.

// receiptSpansVersion is the schema from which the receipts are summarized in spans and
// receipts_finished_at is gone.
const receiptSpansVersion = 26

// spanReceipts is how many receipts a span holds: besides its own receipts, a window reads the
// rest of the span it begins in (and the whole of a span one of whose receipts finished far out
// of the chain's order), and receipt_spans holds a row for this many receipts.
const spanReceipts = 512

// receiptSpans reports whether the transaction's schema summarizes the chain in spans.
func (t *txn) receiptSpans() bool { return t.version == 0 || t.version >= receiptSpansVersion }

// receiptSpans reports whether the store's schema summarizes the chain in spans.
func (s *Store) receiptSpans() bool { return s.version == 0 || s.version >= receiptSpansVersion }

// writeSpan writes the span that the receipt at seq, which this transaction appended, ends.
func (t *txn) writeSpan(seq int64) error {
	first := seq - spanReceipts + 1
	if _, err := t.c.exec(`INSERT INTO receipt_spans (last_seq, first_seq, max_finished)
		SELECT ?, ?, MAX(finished_at) FROM receipts WHERE seq BETWEEN ? AND ?`, seq, first, first, seq); err != nil {
		return fmt.Errorf("receipt span %d–%d: %w", first, seq, err)
	}
	return nil
}

// windowSeqs selects the seqs of the receipts that finished at or after its one argument
// (repeated three times): those of the spans whose latest receipt did, and those after the last
// span, each kept only if it did.
const windowSeqs = `SELECT r.seq FROM receipt_spans s JOIN receipts r ON r.seq BETWEEN s.first_seq AND s.last_seq
		WHERE s.max_finished >= ? AND r.finished_at >= ?
	UNION ALL SELECT seq FROM receipts WHERE seq > (SELECT COALESCE(MAX(last_seq), 0) FROM receipt_spans) AND finished_at >= ?`
