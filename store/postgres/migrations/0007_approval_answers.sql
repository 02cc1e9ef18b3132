-- latch schema 7: the answers people give to approval requests (docs/approvals.md). A request
-- that needs several grants (approvers.required) collects one row per person here; its status
-- in approvals changes when a deny or the last required grant arrives.
--
--   approver      the name as answers record it (NFKC-normalized, trimmed)
--   approver_key  the name as people are compared (case-folded, without spaces or invisible
--                 characters): one person answers a request once, however they spell their
--                 name or however many sessions and tokens they use
--   method        how the approver was authenticated: cli, token, jwt, session or proxy
--   verified      true when latch authenticated the approver (never for cli)
--   granted       true for a grant, false for a deny
--   required      how many distinct grants the request needed when this answer was given
--
-- {schema} is replaced by the quoted schema name before this runs. Readers of the previous
-- binary do not know this table and read the schema unchanged.

CREATE TABLE {schema}.approval_answers (
	approval_id  text    NOT NULL REFERENCES {schema}.approvals (approval_id),
	n            integer NOT NULL CHECK (n >= 1),
	approver     text    NOT NULL,
	approver_key text    NOT NULL CHECK (approver_key <> ''),
	method       text    NOT NULL CHECK (method IN ('cli', 'token', 'jwt', 'session', 'proxy')),
	verified     boolean NOT NULL CHECK (NOT verified OR method <> 'cli'),
	granted      boolean NOT NULL,
	note         text    NOT NULL DEFAULT '',
	answered_at  bigint  NOT NULL,
	required     integer NOT NULL CHECK (required >= 1),
	PRIMARY KEY (approval_id, n),
	UNIQUE (approval_id, approver_key)
);
