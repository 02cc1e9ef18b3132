-- latch schema 4: the tables a protected call writes to, rebuilt so that each of its two
-- transactions writes into fewer B-trees. Every B-tree a transaction changes is at least one page
-- in the write-ahead log of its commit, and pages are what a commit costs (docs/performance.md):
--
--   effects   WITHOUT ROWID: the row is stored in its primary key (effect_key), where a rowid
--             table kept the row in one B-tree and the key in an automatic unique index beside
--             it, so that an insert wrote both.
--   events    INTEGER PRIMARY KEY without AUTOINCREMENT: AUTOINCREMENT writes the table's row
--             in sqlite_sequence on every insert. It only differs from a plain rowid in never
--             reusing the id of a deleted row, and latch never deletes an event: the next id is
--             the largest plus one either way.
--   receipts  no UNIQUE on receipt_id: its automatic index was written by every receipt and
--             read by nothing (receipts are looked up by seq, action, effect key, approval and
--             time). Receipt ids are 128 random bits; the index was only a safety net.
--
-- effects_state now holds only failed and ambiguous effects (below). The columns, their types and
-- constraints, and every other index are as they were, under the same names, so that the queries of read.go run unchanged on schema 3 and 4 alike. chain_head,
-- approvals and the delegation tables are not touched.
--
-- Each table is rebuilt the way SQLite documents for a change ALTER TABLE cannot make: create
-- the new table under another name, copy every row (ids and seqs included), drop the old table
-- (which drops its indexes), rename the new one, create the indexes. It all runs in the
-- migration's one transaction: a failure leaves schema 3 as it was. No foreign key refers to or
-- from these three tables and no trigger or view names them, so there is nothing to re-check or
-- re-point. The migration rewrites the three tables once, holding the write lock meanwhile, which
-- takes time and log space in proportion to them; the pages of the old tables stay in the file as
-- free pages, which the store reuses as it grows.

CREATE TABLE effects_v4 (
	effect_key       TEXT    PRIMARY KEY,
	state            TEXT    NOT NULL CHECK (state IN ('executing', 'committed', 'failed', 'ambiguous')),
	attempt          INTEGER NOT NULL CHECK (attempt >= 1),
	action_id        TEXT    NOT NULL,
	action           TEXT    NOT NULL,
	action_hash      TEXT    NOT NULL,
	lease_expires_at INTEGER,
	result           TEXT,
	error            TEXT    NOT NULL DEFAULT '',
	resolved_by      TEXT    NOT NULL DEFAULT '',
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

INSERT INTO effects_v4 (effect_key, state, attempt, action_id, action, action_hash, lease_expires_at, result, error,
	resolved_by, created_at, updated_at)
SELECT effect_key, state, attempt, action_id, action, action_hash, lease_expires_at, result, error,
	resolved_by, created_at, updated_at
FROM effects ORDER BY effect_key;

DROP TABLE effects;
ALTER TABLE effects_v4 RENAME TO effects;
-- Only the states that wait for a person (failed, ambiguous): an executing entry was written by
-- every reservation and removed by every record, two pages a call, for an operator's listing of
-- calls in flight, which reads the table instead.
CREATE INDEX effects_state ON effects (state) WHERE state IN ('failed', 'ambiguous');

CREATE TABLE events_v4 (
	id          INTEGER PRIMARY KEY,
	kind        TEXT    NOT NULL,
	at          INTEGER NOT NULL,
	action_id   TEXT    NOT NULL DEFAULT '',
	effect_key  TEXT    NOT NULL DEFAULT '',
	approval_id TEXT    NOT NULL DEFAULT '',
	payload     TEXT
) STRICT;

INSERT INTO events_v4 (id, kind, at, action_id, effect_key, approval_id, payload)
SELECT id, kind, at, action_id, effect_key, approval_id, payload
FROM events ORDER BY id;

-- Dropping the AUTOINCREMENT table also deletes its row in sqlite_sequence. The (then empty)
-- sqlite_sequence table itself stays: SQLite does not let it be dropped.
DROP TABLE events;
ALTER TABLE events_v4 RENAME TO events;
CREATE INDEX events_action_id ON events (action_id);
CREATE INDEX events_effect_key ON events (effect_key);
CREATE INDEX events_approval_id ON events (approval_id) WHERE approval_id <> '';

-- doc is the exact canonical bytes the hash covers; the other columns are copies for filtering.
CREATE TABLE receipts_v4 (
	seq         INTEGER PRIMARY KEY CHECK (seq >= 1),
	hash        TEXT    NOT NULL,
	receipt_id  TEXT    NOT NULL,
	action_id   TEXT    NOT NULL DEFAULT '',
	action      TEXT    NOT NULL DEFAULT '',
	effect_key  TEXT    NOT NULL DEFAULT '',
	approval_id TEXT    NOT NULL DEFAULT '',
	result      TEXT    NOT NULL,
	finished_at INTEGER NOT NULL,
	doc         TEXT    NOT NULL
) STRICT;

INSERT INTO receipts_v4 (seq, hash, receipt_id, action_id, action, effect_key, approval_id, result, finished_at, doc)
SELECT seq, hash, receipt_id, action_id, action, effect_key, approval_id, result, finished_at, doc
FROM receipts ORDER BY seq;

DROP TABLE receipts;
ALTER TABLE receipts_v4 RENAME TO receipts;
CREATE INDEX receipts_action_id ON receipts (action_id);
CREATE INDEX receipts_effect_key ON receipts (effect_key);
CREATE INDEX receipts_approval_id ON receipts (approval_id) WHERE approval_id <> '';
CREATE INDEX receipts_finished_at ON receipts (finished_at);
