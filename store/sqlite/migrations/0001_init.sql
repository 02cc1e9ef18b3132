-- latch schema 1: effects, approvals, the receipt chain and the event log.
-- Times are INTEGER unix nanoseconds, UTC; NULL is the zero time.

CREATE TABLE effects (
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
) STRICT;

CREATE INDEX effects_state ON effects (state);

CREATE TABLE approvals (
	approval_id    TEXT    PRIMARY KEY,
	status         TEXT    NOT NULL CHECK (status IN ('pending', 'granted', 'denied', 'expired', 'consumed')),
	action_hash    TEXT    NOT NULL,
	action         TEXT,
	action_name    TEXT    NOT NULL DEFAULT '',
	agent          TEXT    NOT NULL DEFAULT '',
	principal_user TEXT    NOT NULL DEFAULT '',
	policy_hash    TEXT    NOT NULL DEFAULT '',
	created_at     INTEGER,
	expires_at     INTEGER,
	approver       TEXT    NOT NULL DEFAULT '',
	answered_at    INTEGER,
	consumed_by    TEXT    NOT NULL DEFAULT '',
	consumed_at    INTEGER
) STRICT;

CREATE INDEX approvals_status ON approvals (status, created_at);

-- doc is the exact canonical bytes the hash covers; the other columns are copies for filtering.
CREATE TABLE receipts (
	seq         INTEGER PRIMARY KEY CHECK (seq >= 1),
	hash        TEXT    NOT NULL,
	receipt_id  TEXT    NOT NULL UNIQUE,
	action_id   TEXT    NOT NULL DEFAULT '',
	action      TEXT    NOT NULL DEFAULT '',
	effect_key  TEXT    NOT NULL DEFAULT '',
	approval_id TEXT    NOT NULL DEFAULT '',
	result      TEXT    NOT NULL,
	finished_at INTEGER NOT NULL,
	doc         TEXT    NOT NULL
) STRICT;

CREATE INDEX receipts_action_id ON receipts (action_id);
CREATE INDEX receipts_effect_key ON receipts (effect_key);
CREATE INDEX receipts_approval_id ON receipts (approval_id);
CREATE INDEX receipts_finished_at ON receipts (finished_at);

-- The chain head: one row, updated in the transaction that appends a receipt.
CREATE TABLE chain_head (
	id   INTEGER PRIMARY KEY CHECK (id = 1),
	seq  INTEGER NOT NULL,
	hash TEXT    NOT NULL
) STRICT;

INSERT INTO chain_head (id, seq, hash) VALUES (1, 0, '');

CREATE TABLE events (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	kind        TEXT    NOT NULL,
	at          INTEGER NOT NULL,
	action_id   TEXT    NOT NULL DEFAULT '',
	effect_key  TEXT    NOT NULL DEFAULT '',
	approval_id TEXT    NOT NULL DEFAULT '',
	payload     TEXT
) STRICT;

CREATE INDEX events_action_id ON events (action_id);
CREATE INDEX events_effect_key ON events (effect_key);
CREATE INDEX events_approval_id ON events (approval_id);
