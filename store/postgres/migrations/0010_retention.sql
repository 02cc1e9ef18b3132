-- latch schema 10: retention (docs/retention.md).
-- {schema} is replaced by the quoted schema name before this runs.
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

CREATE TABLE {schema}.holds (
	hold_id        text    PRIMARY KEY,
	n              bigint NOT NULL UNIQUE,
	from_seq       bigint NOT NULL CHECK (from_seq >= 1),
	to_seq         bigint NOT NULL CHECK (to_seq >= from_seq),
	reason         text    NOT NULL CHECK (reason <> ''),
	created_by     text    NOT NULL,
	created_at     bigint NOT NULL,
	released_at    bigint,
	released_by    text    NOT NULL DEFAULT '',
	release_reason text    NOT NULL DEFAULT ''
);

CREATE TABLE {schema}.prunes (
	id           bigint PRIMARY KEY,
	start_seq    bigint NOT NULL CHECK (start_seq >= 1),
	start_hash   text    NOT NULL,
	cp_signed_at bigint NOT NULL,
	cp_store_id  text    NOT NULL,
	cp_key_id    text    NOT NULL,
	cp_signature text    NOT NULL,
	pruned_at    bigint NOT NULL,
	pruned_by    text    NOT NULL,
	record_seq   bigint NOT NULL,
	removed      bigint NOT NULL,
	carried      bigint NOT NULL,
	carried_hash text    NOT NULL
);

CREATE TABLE {schema}.carried (
	kind text    NOT NULL CHECK (kind IN ('effect', 'approval', 'delegation', 'hold')),
	key  text    NOT NULL,
	seq  bigint NOT NULL,
	doc  bytea   NOT NULL,
	PRIMARY KEY (kind, key)
);
