-- latch schema 9: signed checkpoints of the receipt chain (docs/guarantees.md#signed-checkpoints).
--
--   store_identity  one row: the store's id, made here once, which every checkpoint names.
--   checkpoints     signed statements "the receipt at seq has this hash, in this store", each
--                   with its Ed25519 signature. The key is kept outside the store: the rows are
--                   only copies, checked against the public key.

CREATE TABLE store_identity (
	id       INTEGER PRIMARY KEY CHECK (id = 1),
	store_id TEXT    NOT NULL
) STRICT;

INSERT INTO store_identity (id, store_id) VALUES (1, 'st_' || lower(hex(randomblob(16))));

CREATE TABLE checkpoints (
	seq       INTEGER NOT NULL CHECK (seq >= 1),
	hash      TEXT    NOT NULL,
	signed_at INTEGER NOT NULL,
	store_id  TEXT    NOT NULL,
	key_id    TEXT    NOT NULL,
	signature TEXT    NOT NULL,
	PRIMARY KEY (seq, key_id, signed_at)
) STRICT;
