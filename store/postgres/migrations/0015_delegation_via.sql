-- latch schema 15: how a delegation came to be (docs/authority.md#break-glass).
--
--   via     'break-glass' for a grant opened in a break-glass envelope (parent is the
--           envelope's id, created_by the person who opened it); '' for a delegation, and for
--           every row stored before this version. A value this binary does not know makes the
--           row unreadable, which denies every call: it is never guessed at.
--   reason  why a break-glass grant was opened, as its opener wrote it; '' otherwise.
--
-- Adding a column with a constant default rewrites nothing and fires no trigger: the table
-- stays insert-only.

ALTER TABLE {schema}.delegations ADD COLUMN via    text NOT NULL DEFAULT '';
ALTER TABLE {schema}.delegations ADD COLUMN reason text NOT NULL DEFAULT '';
