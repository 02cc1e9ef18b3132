-- latch schema 9: local approver accounts of the console (latch approver add). Only a bcrypt
-- hash of a password is kept. name_key is the name as names are compared (case folded, NFKC,
-- without white space or invisible characters): "Alice" and "alice" are one account.

CREATE TABLE {schema}.accounts (
	name          text   PRIMARY KEY,
	name_key      text   NOT NULL UNIQUE,
	password_hash text   NOT NULL,
	roles         text   NOT NULL, -- a JSON array of role names, sorted
	created_at    bigint NOT NULL
);
