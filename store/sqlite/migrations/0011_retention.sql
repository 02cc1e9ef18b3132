-- latch schema 11: retention (docs/retention.md).
--
--   holds    legal holds: a range of seqs no prune removes until the hold is released. A
--            released hold stays, with who released it and why; both are chained records too.
--   prunes   one row per prune: the signed checkpoint it pruned below (a copy), who pruned and
--            when, its own record's seq, and what it carried. The last row says where the chain
--            starts.
--   carried  what the removed records said of rows still kept (an effect duplicates are
--            answered from, a pending approval, a delegation, a hold): one per row, the state
--            check's stand-in for the records the last prune removed. Its hash is in the prune's
--            record.

CREATE TABLE holds (
	hold_id        TEXT    PRIMARY KEY,
	n              INTEGER NOT NULL UNIQUE,
	from_seq       INTEGER NOT NULL CHECK (from_seq >= 1),
	to_seq         INTEGER NOT NULL CHECK (to_seq >= from_seq),
	reason         TEXT    NOT NULL CHECK (reason <> ''),
	created_by     TEXT    NOT NULL,
	created_at     INTEGER NOT NULL,
	released_at    INTEGER,
	released_by    TEXT    NOT NULL DEFAULT '',
	release_reason TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE TABLE prunes (
	id           INTEGER PRIMARY KEY,
	start_seq    INTEGER NOT NULL CHECK (start_seq >= 1),
	start_hash   TEXT    NOT NULL,
	cp_signed_at INTEGER NOT NULL,
	cp_store_id  TEXT    NOT NULL,
	cp_key_id    TEXT    NOT NULL,
	cp_signature TEXT    NOT NULL,
	pruned_at    INTEGER NOT NULL,
	pruned_by    TEXT    NOT NULL,
	record_seq   INTEGER NOT NULL,
	removed      INTEGER NOT NULL,
	carried      INTEGER NOT NULL,
	carried_hash TEXT    NOT NULL
) STRICT;

CREATE TABLE carried (
	kind TEXT    NOT NULL CHECK (kind IN ('effect', 'approval', 'delegation', 'hold')),
	key  TEXT    NOT NULL,
	seq  INTEGER NOT NULL,
	doc  TEXT    NOT NULL,
	PRIMARY KEY (kind, key)
) STRICT;
