-- latch schema 15: the budget ledger (docs/budgets.md).
--
--   budget_charges  one row per budget charge a reservation made, inserted in the reservation's
--                   own transaction: amount of metric against budget, whose limit holds over a
--                   rolling window (window_ns nanoseconds), for attempt of effect_key, reserved
--                   by action_id at consumed_at. released_at is set (a compare-and-set on NULL,
--                   never a decrement) when the attempt becomes failed; the charge is held in
--                   every other state. A renewal charges again under its new attempt, so one
--                   effect holds at most one unreleased row per (budget, metric). Times are
--                   unix nanoseconds. The chain checks it: a call's receipt records the charges
--                   its reservation made (budget_charges), and its effect's records when its
--                   attempt became failed.
--
-- The index serves the reservation's check — the unreleased amount of (budget, metric) consumed
-- within a window — from the index alone, and the ledger read (by budget and metric, oldest
-- first).

CREATE TABLE budget_charges (
	effect_key   TEXT    NOT NULL CHECK (effect_key <> ''),
	attempt      INTEGER NOT NULL CHECK (attempt >= 1),
	budget       TEXT    NOT NULL CHECK (budget <> ''),
	metric       TEXT    NOT NULL CHECK (metric <> ''),
	amount       INTEGER NOT NULL CHECK (amount >= 0),
	budget_limit INTEGER NOT NULL CHECK (budget_limit >= 0),
	window_ns    INTEGER NOT NULL CHECK (window_ns > 0),
	action_id    TEXT    NOT NULL,
	consumed_at  INTEGER NOT NULL,
	released_at  INTEGER,
	PRIMARY KEY (effect_key, attempt, budget, metric)
) STRICT, WITHOUT ROWID;

CREATE INDEX budget_charges_by_budget ON budget_charges (budget, metric, consumed_at, released_at, amount);
