-- latch schema 5: what an effect record needs so that late outcomes, resolutions and reconcile
-- hooks can be told apart and explained (docs/design.md, "Late outcomes and resolutions"):
--
--   effects.arguments  the canonical arguments of the attempt that holds the record, so that a
--                      reconcile hook is asked about the attempt it reconciles and a call with
--                      other arguments under the same key is named a key_conflict. NULL for
--                      records written before this schema.
--   effects.note       the note of the person who resolved the record (latch resolve --note).
--   effects.conflict   set when the holder's own outcome arrived after someone resolved the
--                      record otherwise: the resolution stands, and this says what the holder
--                      reported. A failed record with a conflict is not renewed until a person
--                      resolves it again.
--   approvals.note     the note of the person who answered the request (--note).
--
-- {schema} is replaced by the quoted schema name before this runs.
-- Readers of the previous binary select the columns they know and read this schema unchanged;
-- readers of this binary need it (they select the new columns), so they refuse an older store
-- until a writer has opened it once.

ALTER TABLE {schema}.effects ADD COLUMN arguments bytea;
ALTER TABLE {schema}.effects ADD COLUMN note text NOT NULL DEFAULT '';
ALTER TABLE {schema}.effects ADD COLUMN conflict text NOT NULL DEFAULT '';
ALTER TABLE {schema}.approvals ADD COLUMN note text NOT NULL DEFAULT '';
