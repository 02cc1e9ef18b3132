-- latch schema 7: a request asked again (docs/guarantees.md#approvals).
--
--   approvals.previous_denied     the id of the request for the same action hash whose answer
--                                 was a denial, when this request was asked after it ('' else)
--   approvals.previous_denied_by  who denied it
--   approvals_action_hash         the requests of one action hash, newest first: a new request
--                                 reuses a pending one of its hash, and finds the last answer
--
-- Both columns are written once, when the request is stored. Readers of the previous binary
-- select the columns they know and read this schema unchanged.

ALTER TABLE approvals ADD COLUMN previous_denied TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN previous_denied_by TEXT NOT NULL DEFAULT '';
CREATE INDEX approvals_action_hash ON approvals (action_hash, created_at);
