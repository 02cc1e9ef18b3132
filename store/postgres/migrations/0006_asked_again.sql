-- latch schema 6: a request asked again (docs/guarantees.md#approvals).
--
--   approvals.previous_denied     the id of the request for the same action hash whose answer
--                                 was a denial, when this request was asked after it ('' else)
--   approvals.previous_denied_by  who denied it
--   approvals_action_hash         the requests of one action hash, newest first: a new request
--                                 reuses a pending one of its hash, and finds the last answer
--
-- {schema} is replaced by the quoted schema name before this runs.
-- Both columns are written once, when the request is stored. Readers of the previous binary
-- select the columns they know and read this schema unchanged.

ALTER TABLE {schema}.approvals ADD COLUMN previous_denied text NOT NULL DEFAULT '';
ALTER TABLE {schema}.approvals ADD COLUMN previous_denied_by text NOT NULL DEFAULT '';
CREATE INDEX approvals_action_hash ON {schema}.approvals (action_hash, created_at);
