-- latch schema 20: the effects a person may have to settle are found through an index of their
-- own, failed effects are paged by key through theirs, and `latch stats` keeps a running tally
-- of the chain it has counted.
--
-- effects_unsettled holds the effects that are ambiguous, executing, or settled with an outcome
-- conflict: what the console's attention page, `latch effects --state needs_person` and the
-- operator MCP list, and the executing effects the sweeper looks at. These were read by a
-- sequential scan of the whole effects table, which holds every effect the store ever recorded
-- (docs/performance.md#flat-as-the-store-grows). A reservation adds its entry and its outcome
-- removes it, so the index holds the calls in flight and those waiting for a person.
--
-- Each statement may run again on a schema that has what it makes (a store whose recorded
-- version was set back): it leaves it as it is.
CREATE INDEX IF NOT EXISTS effects_unsettled ON {schema}.effects (effect_key)
	WHERE state IN ('ambiguous', 'executing') OR conflict <> '';

-- effects_state (failed and ambiguous effects) gains the key, so that a page of failed effects
-- after a key is read in key order from the index rather than sorted.
DROP INDEX IF EXISTS {schema}.effects_state;
CREATE INDEX effects_state ON {schema}.effects (state, effect_key) WHERE state IN ('failed', 'ambiguous');

-- receipt_tally is what `latch stats` counted over the chain from from_seq through through_seq
-- (a receipt.Stats document), so that the next count reads only the receipts appended since. It
-- is a cache the count keeps, never evidence: a tally whose from_seq is not the chain's first seq
-- (the chain was pruned since) is counted again from the start.
CREATE TABLE IF NOT EXISTS {schema}.receipt_tally (
	id          INTEGER PRIMARY KEY CHECK (id = 1),
	from_seq    BIGINT  NOT NULL,
	through_seq BIGINT  NOT NULL,
	doc         TEXT    NOT NULL
);
