-- latch schema 22: receipts are found by action and by effect through the events table's
-- indexes instead of two of their own (docs/performance.md#receipts-found-through-the-event-indexes).
-- A protected call's record wrote its action id and effect key into four B-trees: the event
-- indexes events_action_id and events_effect_key (for its execution event) and the receipt
-- indexes receipts_action_id and receipts_effect_key (for its receipt). The event indexes now
-- serve both: the event row a write appends for the receipt's action and effect carries the
-- receipt's seq, and the receipt indexes go.
--
-- seq is the seq of the receipt the row's write appended for the row's action and effect (NULL:
-- none). A write that appends a receipt with no event row of its action and effect appends a row
-- that only links it: id -seq (negative ids are never event ids, and each seq has one), kind ''.
-- Every receipt stored before this version gets such a row here, so that every receipt with an
-- action id or an effect key is found through the event indexes from now on.

ALTER TABLE events ADD COLUMN seq INTEGER;

INSERT INTO events (id, kind, at, action_id, effect_key, approval_id, seq)
SELECT -seq, '', finished_at, action_id, effect_key, '', seq FROM receipts
WHERE action_id <> '' OR effect_key <> '';

DROP INDEX receipts_action_id;
DROP INDEX receipts_effect_key;
