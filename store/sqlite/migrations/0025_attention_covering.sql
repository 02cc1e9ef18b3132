-- latch schema 25: what needs a person is read from its index alone.
--
-- effects_attention (schema 24) holds the keys of the ambiguous effects and of those settled with
-- an outcome conflict: the attention page, `needs_person` and `--state ambiguous` scanned it and
-- then looked each effect up in the effects table. effects is a WITHOUT ROWID table of rows of some
-- 300 bytes, which SQLite keeps in interior pages too: a few thousand effects take a tree of
-- seven levels, and each lookup reads four or five pages that no cache keeps (a reader's page
-- cache is emptied whenever another connection commits). The console's attention page over 470
-- such effects in a store of five million receipts took 18.6 ms (p50); read from an index that
-- carries every column of the effect, 2.4 ms, whatever the store's size.
--
-- The index holds the whole row of each effect that needs a person, and only of those: calls
-- that end committed or failed never write it, as before.

DROP INDEX effects_attention;

CREATE INDEX effects_attention ON effects (effect_key, state, attempt, action_id, action, action_hash,
	lease_expires_at, result, error, resolved_by, created_at, updated_at, arguments, note, conflict)
	WHERE state = 'ambiguous' OR conflict <> '';
