-- latch schema 18: standing approvals (docs/approvals.md#standing-approvals).
--
-- standing_approvals holds one row per standing approval. The record is the JSON document doc;
-- status and uses are copied into columns so that spending a use and revoking are
-- compare-and-set on them, under the row lock a reservation takes when it reads the row.
--
-- approval_answers.standing is the terms a grant asked for, as JSON; '' for a plain grant
-- (and for every answer given before this version).

CREATE TABLE {schema}.standing_approvals (
	standing_id text PRIMARY KEY,
	status      text NOT NULL,
	uses        integer NOT NULL,
	created_at  bigint NOT NULL,
	doc         text NOT NULL
);

ALTER TABLE {schema}.approval_answers ADD COLUMN standing text NOT NULL DEFAULT '';
