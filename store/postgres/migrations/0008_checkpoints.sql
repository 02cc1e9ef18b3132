-- latch schema 8: signed checkpoints of the receipt chain (docs/guarantees.md#signed-checkpoints).
-- {schema} is replaced by the quoted schema name before this runs.
--
--   store_identity  one row: the store's id, made here once, which every checkpoint names.
--   checkpoints     signed statements "the receipt at seq has this hash, in this store", each
--                   with its Ed25519 signature. The key is kept outside the store: the rows are
--                   only copies, checked against the public key.

CREATE TABLE {schema}.store_identity (
	id       integer PRIMARY KEY CHECK (id = 1),
	store_id text    NOT NULL
);

INSERT INTO {schema}.store_identity (id, store_id) VALUES (1, 'st_' || md5(random()::text || clock_timestamp()::text));

CREATE TABLE {schema}.checkpoints (
	seq       bigint NOT NULL CHECK (seq >= 1),
	hash      text   NOT NULL,
	signed_at bigint NOT NULL,
	store_id  text   NOT NULL,
	key_id    text   NOT NULL,
	signature text   NOT NULL,
	PRIMARY KEY (seq, key_id, signed_at)
);
