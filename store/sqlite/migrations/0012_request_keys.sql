-- latch schema 12: request keys (docs/http.md#replaying-a-begin). A caller's key for one
-- reservation, stored with it in its transaction, so that the caller whose reply was lost asks
-- again and is handed the same reservation. A key belongs to the principal (agent, user) that
-- first used it, for one action hash, effect key and approval; action_id and attempt name the
-- last reservation made with it.

CREATE TABLE request_keys (
	request_key    TEXT    PRIMARY KEY,
	agent          TEXT    NOT NULL,
	principal_user TEXT    NOT NULL,
	action_hash    TEXT    NOT NULL,
	effect_key     TEXT    NOT NULL,
	approval_id    TEXT    NOT NULL,
	action_id      TEXT    NOT NULL,
	attempt        INTEGER NOT NULL CHECK (attempt >= 1),
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL
) STRICT;
