-- latch schema 11: request keys (docs/http.md#replaying-a-begin). A caller's key for one
-- reservation, stored with it in its transaction, so that the caller whose reply was lost asks
-- again and is handed the same reservation. A key belongs to the principal (agent, user) that
-- first used it, for one action hash, effect key and approval; action_id and attempt name the
-- last reservation made with it.
-- {schema} is replaced by the quoted schema name before this runs.

CREATE TABLE {schema}.request_keys (
	request_key    text   PRIMARY KEY,
	agent          text   NOT NULL,
	principal_user text   NOT NULL,
	action_hash    text   NOT NULL,
	effect_key     text   NOT NULL,
	approval_id    text   NOT NULL,
	action_id      text   NOT NULL,
	attempt        bigint NOT NULL CHECK (attempt >= 1),
	created_at     bigint NOT NULL,
	updated_at     bigint NOT NULL
);
