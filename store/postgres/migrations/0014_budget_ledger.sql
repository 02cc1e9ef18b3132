-- latch schema 14: the budget ledger (docs/budgets.md).
-- {schema} is replaced by the quoted schema name before this runs.
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

CREATE TABLE {schema}.budget_charges (
	effect_key   text   NOT NULL CHECK (effect_key <> ''),
	attempt      bigint NOT NULL CHECK (attempt >= 1),
	budget       text   NOT NULL CHECK (budget <> ''),
	metric       text   NOT NULL CHECK (metric <> ''),
	amount       bigint NOT NULL CHECK (amount >= 0),
	budget_limit bigint NOT NULL CHECK (budget_limit >= 0),
	window_ns    bigint NOT NULL CHECK (window_ns > 0),
	action_id    text   NOT NULL,
	consumed_at  bigint NOT NULL,
	released_at  bigint,
	PRIMARY KEY (effect_key, attempt, budget, metric)
);

CREATE INDEX budget_charges_by_budget ON {schema}.budget_charges (budget, metric, consumed_at) INCLUDE (released_at, amount);
