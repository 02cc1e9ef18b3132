-- latch schema 16: the precondition fingerprint of an approval request (docs/governance.md).
--
--   precondition_hash  the hash of the target's state when the request was stored, as the
--                      action's precondition provider returned it; '' when no provider applied
--                      (and for every request stored before this version).
--   precondition_at    when that state was read; NULL when none was.
--
-- Only the hash is kept: the state itself is written nowhere. Adding a column with a constant
-- default rewrites nothing.

ALTER TABLE {schema}.approvals ADD COLUMN precondition_hash text NOT NULL DEFAULT '';
ALTER TABLE {schema}.approvals ADD COLUMN precondition_at   bigint;
