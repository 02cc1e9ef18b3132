-- latch schema 21: the events one write transaction appends for one action, effect and request
-- are one row (docs/performance.md#events-one-row-a-transaction). A reservation's three events
-- (action_proposed, policy_evaluated, effect_reserved) were three rows, three entries in each of
-- the two event indexes and three statements; they are now one of each.
--
-- The row carries its first event in the columns it always had; n is how many events the row
-- holds (NULL for one), and more is the JSON array of the others, in order, each as
-- {"at": unix nanoseconds, "kind": …, "payload": the event's JSON object or null}. Event ids stay
-- consecutive across rows: a row's id is its first event's id, its other events have the ids
-- after it, and the next row starts after its last. Rows written before this version hold one
-- event each (n and more NULL), so every existing id, cursor and query result is unchanged.

ALTER TABLE events ADD COLUMN n INTEGER CHECK (n IS NULL OR n BETWEEN 2 AND 8);
ALTER TABLE events ADD COLUMN more TEXT CHECK ((n IS NULL) = (more IS NULL));
