-- latch schema 12: reconcile claims (docs/guarantees.md#the-sweeper-asks-reconcile-hooks).
--
--   reconcile_claims  one row per effect whose reconcile hook a sweeper asked: which ambiguous
--                     attempt, which sweeper, how many times that attempt was asked, until when
--                     the claim keeps other sweepers out and when the attempt may be asked
--                     again. Times are unix nanoseconds. Not part of the receipt chain: what a
--                     hook answered is in the events, and what it resolved in a resolution record.

CREATE TABLE reconcile_claims (
	effect_key TEXT    PRIMARY KEY,
	attempt    INTEGER NOT NULL CHECK (attempt >= 1),
	holder     TEXT    NOT NULL CHECK (holder <> ''),
	tries      INTEGER NOT NULL CHECK (tries >= 1),
	claimed_at INTEGER NOT NULL,
	held_until INTEGER NOT NULL,
	next_at    INTEGER NOT NULL
) STRICT;
