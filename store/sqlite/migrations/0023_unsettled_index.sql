-- latch schema 23: the effects a person may have to settle are found through an index of their
-- own, and `latch stats` keeps a running tally of the chain it has counted.
--
-- effects_unsettled holds the keys of the effects that are ambiguous, executing, or settled with
-- an outcome conflict: what the console's attention page, `latch effects --state needs_person`
-- and the operator MCP list, and the executing effects the sweeper looks at. These were read by a
-- scan of the whole effects table, which holds every effect the store ever recorded
-- (docs/performance.md#flat-as-the-store-grows). A reservation adds its key and its outcome
-- removes it, so the index holds the calls in flight and those waiting for a person, nothing
-- else. Reads name the index's condition as it is written here, which is how SQLite knows the
-- index serves them.
CREATE INDEX effects_unsettled ON effects (effect_key)
	WHERE state IN ('ambiguous', 'executing') OR conflict <> '';

-- receipt_tally is what `latch stats` counted over the chain from from_seq through through_seq
-- (a receipt.Stats document), so that the next count reads only the receipts appended since. It
-- is a cache the count keeps, never evidence: a tally whose from_seq is not the chain's first seq
-- (the chain was pruned since) is counted again from the start.
CREATE TABLE receipt_tally (
	id          INTEGER PRIMARY KEY CHECK (id = 1),
	from_seq    INTEGER NOT NULL,
	through_seq INTEGER NOT NULL,
	doc         TEXT    NOT NULL
) STRICT;
