-- latch schema 24: the executing effects are found without an index entry a call
-- (docs/performance.md#executing-effects-found-through-the-events-since-a-mark).
--
-- Schema 23 found the executing effects through effects_unsettled, whose condition named them:
-- every reservation added an entry and every outcome removed it, so each of a call's two commits
-- wrote a page of that index, some two of a call's sixteen pages. An executing effect is now
-- found in one of two places, and a read looks in both:
--
--   - executing_window.from_event marks a point in the events table. Every write that makes an
--     effect executing appends the effect's effect_reserved event in the same transaction, so an
--     effect made executing since the mark is named by a row holding that event whose id is
--     from_event or higher.
--   - executing_parked holds the keys of effects that were executing when the mark last moved.
--
-- A writer moves the mark forward once it has appended some hundreds of event rows, at the start
-- of a batch's transaction: it parks the effects those rows reserve that are still executing, drops
-- from executing_parked the keys of effects no longer executing, and sets from_event after the
-- last row. A read therefore looks at a bounded number of rows, whatever the store's size, and a
-- call writes nothing for it. Both places may name effects that settled since; every read checks
-- the effect's state.
--
-- effects_attention keeps what needs a person beyond the executing effects: the ambiguous ones
-- and those settled with an outcome conflict, which are written only by calls that end there.

CREATE TABLE executing_window (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	from_event INTEGER NOT NULL
) STRICT;

CREATE TABLE executing_parked (
	effect_key TEXT PRIMARY KEY
) WITHOUT ROWID, STRICT;

INSERT INTO executing_parked (effect_key)
SELECT effect_key FROM effects WHERE (state IN ('ambiguous', 'executing') OR conflict <> '') AND state = 'executing';

-- The mark starts at the id the next event row gets.
INSERT INTO executing_window (id, from_event)
VALUES (1, COALESCE((SELECT id + COALESCE(n, 1) FROM events WHERE id > 0 ORDER BY id DESC LIMIT 1), 1));

DROP INDEX effects_unsettled;

CREATE INDEX effects_attention ON effects (effect_key)
	WHERE state = 'ambiguous' OR conflict <> '';
