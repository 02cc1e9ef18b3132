-- latch schema 19: standing approvals (docs/approvals.md#standing-approvals).
--
-- standing_approvals holds one row per standing approval. The record is the JSON document doc;
-- status and uses are copied into columns so that spending a use and revoking are
-- compare-and-set on them: two reservations that read the same uses cannot both write.
--
-- approval_answers.standing is the terms a grant asked for, as JSON; '' for a plain grant
-- (and for every answer given before this version).

CREATE TABLE standing_approvals (
	standing_id TEXT PRIMARY KEY,
	status      TEXT NOT NULL,
	uses        INTEGER NOT NULL,
	created_at  INTEGER NOT NULL,
	doc         TEXT NOT NULL
);

ALTER TABLE approval_answers ADD COLUMN standing TEXT NOT NULL DEFAULT '';
