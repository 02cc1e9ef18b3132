-- latch schema 2: delegations (docs/authority.md). Both tables are insert-only: a delegation is never
-- changed, and revoking one inserts a row that cuts it and everything beneath it.

CREATE TABLE delegations (
	delegation_id TEXT    PRIMARY KEY,
	parent        TEXT    NOT NULL,
	grant_doc     TEXT    NOT NULL,
	created_by    TEXT    NOT NULL,
	created_at    INTEGER NOT NULL,
	seq           INTEGER NOT NULL UNIQUE
) STRICT;

CREATE TABLE revocations (
	delegation_id TEXT    PRIMARY KEY REFERENCES delegations (delegation_id),
	revoked_by    TEXT    NOT NULL,
	revoked_at    INTEGER NOT NULL
) STRICT;

CREATE TRIGGER delegations_insert_only_update BEFORE UPDATE ON delegations
BEGIN SELECT RAISE(ABORT, 'delegations are insert-only'); END;
CREATE TRIGGER delegations_insert_only_delete BEFORE DELETE ON delegations
BEGIN SELECT RAISE(ABORT, 'delegations are insert-only'); END;
CREATE TRIGGER revocations_insert_only_update BEFORE UPDATE ON revocations
BEGIN SELECT RAISE(ABORT, 'revocations are insert-only'); END;
CREATE TRIGGER revocations_insert_only_delete BEFORE DELETE ON revocations
BEGIN SELECT RAISE(ABORT, 'revocations are insert-only'); END;
