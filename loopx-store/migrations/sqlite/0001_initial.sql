-- loopx store, schema 1: the event log, receipts, snapshots and the per-goal index rows.
-- Applied in one transaction; the schema_version row is written by the migration runner.

CREATE TABLE schema_version (
    version INTEGER NOT NULL
);

-- One row per goal: its revision, standing and the window its index rows are exact for.
CREATE TABLE goals (
    goal TEXT PRIMARY KEY NOT NULL,
    revision INTEGER NOT NULL,
    objective TEXT NOT NULL,
    status TEXT NOT NULL,
    -- The index rows (status, frontier) are exact for valid_from <= now < valid_until
    -- (milliseconds since the Unix epoch; NULL: until the next commit).
    valid_from INTEGER NOT NULL,
    valid_until INTEGER,
    -- The time of the goal's latest event.
    updated_at INTEGER NOT NULL,
    -- Events up to this revision were compacted into the base snapshot (0: never compacted).
    base_revision INTEGER NOT NULL DEFAULT 0,
    -- The revision of the latest snapshot (0: none yet).
    snapshot_revision INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE INDEX goals_by_valid_until ON goals (valid_until);
CREATE INDEX goals_by_valid_from ON goals (valid_from);
CREATE INDEX goals_by_status ON goals (status);

-- The append-only event log: one row per event, in revision order per goal.
CREATE TABLE events (
    goal TEXT NOT NULL,
    revision INTEGER NOT NULL,
    at INTEGER NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (goal, revision)
);

-- One row per committed operation, kept across compaction (idempotency and audit).
CREATE TABLE receipts (
    seq INTEGER PRIMARY KEY,
    goal TEXT NOT NULL,
    operation TEXT NOT NULL,
    digest TEXT NOT NULL,
    revision INTEGER NOT NULL,
    events INTEGER NOT NULL,
    committed_at INTEGER NOT NULL,
    -- The issuing actor as JSON (NULL for a recorded no-op) and the event names, as a JSON array.
    actor TEXT,
    kinds TEXT NOT NULL,
    UNIQUE (goal, operation)
);

CREATE INDEX receipts_by_revision ON receipts (goal, revision);

-- Goal states as of a revision: the latest periodic one bounds load time, the base one is
-- where a compacted goal's kept events start.
CREATE TABLE snapshots (
    goal TEXT NOT NULL,
    revision INTEGER NOT NULL,
    json TEXT NOT NULL,
    PRIMARY KEY (goal, revision)
);

-- The agents registered with each goal.
CREATE TABLE goal_agents (
    agent TEXT NOT NULL,
    goal TEXT NOT NULL,
    PRIMARY KEY (agent, goal)
) WITHOUT ROWID;

CREATE INDEX goal_agents_by_goal ON goal_agents (goal);

-- Each registered agent's frontier in each goal, as a JSON array of [priority, todo] pairs in
-- the kernel's order (priority 0 is the most urgent); agents with an empty frontier have no row.
CREATE TABLE frontier (
    agent TEXT NOT NULL,
    goal TEXT NOT NULL,
    todos TEXT NOT NULL,
    PRIMARY KEY (agent, goal)
) WITHOUT ROWID;

CREATE INDEX frontier_by_goal ON frontier (goal);
