-- latch schema 1: effects, approvals, the receipt chain and the event log.
-- {schema} is replaced by the quoted schema name before this runs.
-- Times are bigint unix nanoseconds, NULL for the zero time, so a stored time compares exactly
-- with the request's Now. JSON documents are bytea: their exact bytes survive, where jsonb would
-- reorder keys and break the receipt hashes.

CREATE TABLE {schema}.effects (
	effect_key       text   PRIMARY KEY,
	state            text   NOT NULL CHECK (state IN ('executing', 'committed', 'failed', 'ambiguous')),
	attempt          bigint NOT NULL CHECK (attempt >= 1),
	action_id        text   NOT NULL,
	action           text   NOT NULL,
	action_hash      text   NOT NULL,
	lease_expires_at bigint,
	result           bytea,
	error            text   NOT NULL DEFAULT '',
	resolved_by      text   NOT NULL DEFAULT '',
	created_at       bigint NOT NULL,
	updated_at       bigint NOT NULL
);

CREATE INDEX effects_state ON {schema}.effects (state);

CREATE TABLE {schema}.approvals (
	approval_id    text   PRIMARY KEY,
	status         text   NOT NULL CHECK (status IN ('pending', 'granted', 'denied', 'expired', 'consumed')),
	action_hash    text   NOT NULL,
	action         bytea,
	action_name    text   NOT NULL DEFAULT '',
	agent          text   NOT NULL DEFAULT '',
	principal_user text   NOT NULL DEFAULT '',
	policy_hash    text   NOT NULL DEFAULT '',
	created_at     bigint,
	expires_at     bigint,
	approver       text   NOT NULL DEFAULT '',
	answered_at    bigint,
	consumed_by    text   NOT NULL DEFAULT '',
	consumed_at    bigint
);

CREATE INDEX approvals_status ON {schema}.approvals (status, created_at);

-- doc is the exact canonical bytes the hash covers; the other columns are copies for filtering.
CREATE TABLE {schema}.receipts (
	seq         bigint PRIMARY KEY CHECK (seq >= 1),
	hash        text   NOT NULL,
	doc         bytea  NOT NULL,
	receipt_id  text   NOT NULL UNIQUE,
	action_id   text   NOT NULL DEFAULT '',
	action      text   NOT NULL DEFAULT '',
	effect_key  text   NOT NULL DEFAULT '',
	approval_id text   NOT NULL DEFAULT '',
	result      text   NOT NULL,
	finished_at bigint NOT NULL
);

CREATE INDEX receipts_action_id ON {schema}.receipts (action_id);
CREATE INDEX receipts_effect_key ON {schema}.receipts (effect_key);
CREATE INDEX receipts_approval_id ON {schema}.receipts (approval_id);
CREATE INDEX receipts_finished_at ON {schema}.receipts (finished_at);

-- The chain head: one row, updated in the transaction that appends a receipt.
CREATE TABLE {schema}.chain_head (
	id   integer PRIMARY KEY CHECK (id = 1),
	seq  bigint  NOT NULL,
	hash text    NOT NULL
);

INSERT INTO {schema}.chain_head (id, seq, hash) VALUES (1, 0, '');

CREATE TABLE {schema}.events (
	id          bigserial PRIMARY KEY,
	kind        text   NOT NULL,
	at          bigint NOT NULL,
	action_id   text   NOT NULL DEFAULT '',
	effect_key  text   NOT NULL DEFAULT '',
	approval_id text   NOT NULL DEFAULT '',
	payload     bytea
);

CREATE INDEX events_action_id ON {schema}.events (action_id);
CREATE INDEX events_effect_key ON {schema}.events (effect_key);
CREATE INDEX events_approval_id ON {schema}.events (approval_id);
