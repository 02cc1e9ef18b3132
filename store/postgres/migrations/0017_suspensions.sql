-- latch schema 17: suspended executions (docs/agents.md#suspended-executions). One row per round:
-- the executor of an executing effect suspended, asking for input, and waits for one resume that
-- presents the token whose SHA-256 is token_sha256 (the token itself is never stored). A round
-- is spent once: resumed_at is set by a compare-and-set on its being 0.
-- {schema} is replaced by the quoted schema name before this runs.

CREATE TABLE {schema}.suspensions (
	action_id        text   NOT NULL,
	round            bigint NOT NULL CHECK (round >= 1),
	effect_key       text   NOT NULL,
	attempt          bigint NOT NULL CHECK (attempt >= 1),
	token_sha256     text   NOT NULL,
	arguments_sha256 text   NOT NULL,
	agent            text   NOT NULL,
	principal_user   text   NOT NULL,
	request          text   NOT NULL,
	suspended_at     bigint NOT NULL,
	lease_expires_at bigint NOT NULL,
	resumed_at       bigint NOT NULL DEFAULT 0,
	input_keys       text   NOT NULL DEFAULT '[]',
	input_sha256     text   NOT NULL DEFAULT '',
	PRIMARY KEY (action_id, round)
);
