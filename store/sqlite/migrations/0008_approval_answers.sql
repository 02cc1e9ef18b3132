-- latch schema 8: the answers people give to approval requests (docs/approvals.md). A request
-- that needs several grants (approvers.required) collects one row per person here; its status
-- in approvals changes when a deny or the last required grant arrives.
--
--   approver      the name as answers record it (NFKC-normalized, trimmed)
--   approver_key  the name as people are compared (case-folded, without spaces or invisible
--                 characters): one person answers a request once, however they spell their
--                 name or however many sessions and tokens they use
--   method        how the approver was authenticated: cli, token, jwt, session or proxy
--   verified      1 when latch authenticated the approver (never for cli)
--   granted       1 for a grant, 0 for a deny
--   required      how many distinct grants the request needed when this answer was given
--
-- Readers of the previous binary do not know this table and read the schema unchanged.

CREATE TABLE approval_answers (
	approval_id  TEXT    NOT NULL REFERENCES approvals (approval_id),
	n            INTEGER NOT NULL CHECK (n >= 1),
	approver     TEXT    NOT NULL,
	approver_key TEXT    NOT NULL CHECK (approver_key <> ''),
	method       TEXT    NOT NULL CHECK (method IN ('cli', 'token', 'jwt', 'session', 'proxy')),
	verified     INTEGER NOT NULL CHECK (verified IN (0, 1) AND (verified = 0 OR method <> 'cli')),
	granted      INTEGER NOT NULL CHECK (granted IN (0, 1)),
	note         TEXT    NOT NULL DEFAULT '',
	answered_at  INTEGER NOT NULL,
	required     INTEGER NOT NULL CHECK (required >= 1),
	PRIMARY KEY (approval_id, n),
	UNIQUE (approval_id, approver_key)
) STRICT;
