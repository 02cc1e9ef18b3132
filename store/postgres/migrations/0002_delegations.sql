-- latch schema 2: delegations (docs/authority.md). Both tables are insert-only: a delegation is never
-- changed, and revoking one inserts a row that cuts it and everything beneath it. Triggers refuse
-- any update, delete or truncate, whoever asks.

CREATE TABLE {schema}.delegations (
	delegation_id text      PRIMARY KEY,
	parent        text      NOT NULL,
	grant_doc     bytea     NOT NULL,
	created_by    text      NOT NULL,
	created_at    bigint    NOT NULL,
	seq           bigserial UNIQUE -- creation order
);

CREATE TABLE {schema}.revocations (
	delegation_id text   PRIMARY KEY REFERENCES {schema}.delegations (delegation_id),
	revoked_by    text   NOT NULL,
	revoked_at    bigint NOT NULL
);

CREATE FUNCTION {schema}.latch_insert_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION '% is insert-only', TG_TABLE_NAME;
END
$$;

CREATE TRIGGER delegations_insert_only BEFORE UPDATE OR DELETE ON {schema}.delegations
	FOR EACH ROW EXECUTE FUNCTION {schema}.latch_insert_only();
CREATE TRIGGER delegations_no_truncate BEFORE TRUNCATE ON {schema}.delegations
	FOR EACH STATEMENT EXECUTE FUNCTION {schema}.latch_insert_only();
CREATE TRIGGER revocations_insert_only BEFORE UPDATE OR DELETE ON {schema}.revocations
	FOR EACH ROW EXECUTE FUNCTION {schema}.latch_insert_only();
CREATE TRIGGER revocations_no_truncate BEFORE TRUNCATE ON {schema}.revocations
	FOR EACH STATEMENT EXECUTE FUNCTION {schema}.latch_insert_only();
