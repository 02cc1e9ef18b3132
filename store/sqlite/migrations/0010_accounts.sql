-- latch schema 10: local approver accounts of the console (latch approver add). Only a bcrypt
-- hash of a password is kept. name_key is the name as names are compared (case folded, NFKC,
-- without white space or invisible characters): "Alice" and "alice" are one account.

CREATE TABLE accounts (
	name          TEXT    PRIMARY KEY,
	name_key      TEXT    NOT NULL UNIQUE,
	password_hash TEXT    NOT NULL,
	roles         TEXT    NOT NULL, -- a JSON array of role names, sorted
	created_at    INTEGER NOT NULL
) STRICT;
