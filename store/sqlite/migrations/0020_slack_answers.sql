-- latch schema 20: answers given through Slack's buttons are recorded with their own method,
-- slack (docs/approvals.md#verified-answers), where they were recorded as proxy before: Slack
-- signs each request and the interactivity endpoint maps the Slack user to an approver, which is
-- not the trusted header of an authenticating proxy.
--
-- SQLite cannot change a CHECK constraint in place, so approval_answers is rebuilt the way
-- SQLite documents for a change ALTER TABLE cannot make: create the new table under another
-- name, copy every row, drop the old table, rename the new one. Its columns, their order and
-- every other constraint are as they were (schema 8, and standing from schema 19), so the
-- queries of earlier versions run unchanged. No foreign key refers to the table and no trigger,
-- view or index names it besides its own keys. It all runs in the migration's one transaction:
-- a failure leaves schema 19 as it was. Answers recorded as proxy before stay proxy.

CREATE TABLE approval_answers_v20 (
	approval_id  TEXT    NOT NULL REFERENCES approvals (approval_id),
	n            INTEGER NOT NULL CHECK (n >= 1),
	approver     TEXT    NOT NULL,
	approver_key TEXT    NOT NULL CHECK (approver_key <> ''),
	method       TEXT    NOT NULL CHECK (method IN ('cli', 'token', 'jwt', 'session', 'proxy', 'slack')),
	verified     INTEGER NOT NULL CHECK (verified IN (0, 1) AND (verified = 0 OR method <> 'cli')),
	granted      INTEGER NOT NULL CHECK (granted IN (0, 1)),
	note         TEXT    NOT NULL DEFAULT '',
	answered_at  INTEGER NOT NULL,
	required     INTEGER NOT NULL CHECK (required >= 1),
	standing     TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (approval_id, n),
	UNIQUE (approval_id, approver_key)
) STRICT;

INSERT INTO approval_answers_v20 (approval_id, n, approver, approver_key, method, verified, granted, note, answered_at, required, standing)
	SELECT approval_id, n, approver, approver_key, method, verified, granted, note, answered_at, required, standing FROM approval_answers;

DROP TABLE approval_answers;

ALTER TABLE approval_answers_v20 RENAME TO approval_answers;
