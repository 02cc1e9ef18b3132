-- latch schema 26: the receipts of a time window found through spans of the chain, not an index
-- entry a receipt.
--
-- receipts_finished_at held one entry for every receipt, so that `latch stats --since` and the
-- windows of GET /v1/stats read only the receipts of their window; it cost every protected call
-- a page of that index (1.05 of the 14.45 pages a call commits). A receipt's finished_at is
-- close to the order of the chain but not bound to it (calls finish out of order, hosts'
-- clocks differ), so the chain is summarized instead in spans of 512 receipts: receipt_spans
-- holds, for each, its first and last seq and the latest finished_at among its receipts. The
-- receipt whose seq ends a span writes the span, in its own transaction; a window
-- reads the receipts of every span whose latest finished_at is in it, and every receipt after
-- the last span, and keeps those whose finished_at is — exactly the receipts the index found,
-- at a page written once in 512 calls.

CREATE TABLE receipt_spans (
	last_seq     INTEGER PRIMARY KEY,
	first_seq    INTEGER NOT NULL,
	max_finished INTEGER NOT NULL
) STRICT;

-- A window finds its spans by their latest finished_at: an entry a span, written once in 512 calls.
CREATE INDEX receipt_spans_max_finished ON receipt_spans (max_finished);

-- Every span the chain has completed: those whose last seq is the chain's head or before it.
INSERT INTO receipt_spans (last_seq, first_seq, max_finished)
SELECT span * 512 + 512, span * 512 + 1, latest
FROM (SELECT (seq - 1) / 512 AS span, MAX(finished_at) AS latest FROM receipts GROUP BY span)
WHERE span * 512 + 512 <= (SELECT MAX(seq) FROM receipts)
ORDER BY span;

DROP INDEX receipts_finished_at;
