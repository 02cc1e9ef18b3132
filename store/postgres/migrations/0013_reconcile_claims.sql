-- latch schema 11: reconcile claims (docs/guarantees.md#the-sweeper-asks-reconcile-hooks).
-- {schema} is replaced by the quoted schema name before this runs.
--
--   reconcile_claims  one row per effect whose reconcile hook a sweeper asked: which ambiguous
--                     attempt, which sweeper, how many times that attempt was asked, until when
--                     the claim keeps other sweepers out and when the attempt may be asked
--                     again. Times are unix nanoseconds. Not part of the receipt chain: what a
--                     hook answered is in the events, and what it resolved in a resolution record.

CREATE TABLE {schema}.reconcile_claims (
	effect_key text   PRIMARY KEY,
	attempt    bigint NOT NULL CHECK (attempt >= 1),
	holder     text   NOT NULL CHECK (holder <> ''),
	tries      bigint NOT NULL CHECK (tries >= 1),
	claimed_at bigint NOT NULL,
	held_until bigint NOT NULL,
	next_at    bigint NOT NULL
);
