-- latch schema 3: indexes that every protected call wrote to, and that only rare operator
-- queries read, hold only the rows those queries look for. Each index a call writes to costs a
-- page in the write-ahead log of every commit (and a commit's cost grows with its pages), so
-- these three save three of the ~24 pages a reserve and a record write. The queries that use
-- them repeat the index's condition (see read.go), which is how SQLite knows it may.

-- approval_id is '' for every call made without an approval: the index of the others.
DROP INDEX events_approval_id;
CREATE INDEX events_approval_id ON events (approval_id) WHERE approval_id <> '';
DROP INDEX receipts_approval_id;
CREATE INDEX receipts_approval_id ON receipts (approval_id) WHERE approval_id <> '';

-- Most effects end committed and are looked up by key; an operator lists the others (executing,
-- failed, ambiguous). A listing of committed effects reads the table.
DROP INDEX effects_state;
CREATE INDEX effects_state ON effects (state) WHERE state <> 'committed';
