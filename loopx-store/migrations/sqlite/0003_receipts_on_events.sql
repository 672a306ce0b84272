-- loopx store, schema 3: a commit's receipt on its last event row. Applied in one transaction;
-- the schema_version row is written by the migration runner.
--
-- A commit that moves the goal no longer writes a receipt row of its own: its operation id,
-- payload digest and event count ride on its last event row (whose revision and time are the
-- receipt's), and its actor and event names are read from its events. The receipts table keeps
-- recorded no-ops, the receipts written before this schema, and the receipts of events that
-- compaction deletes (moved there first, with their actor and event names). The event log
-- becomes a table clustered on (goal, revision), without a separate rowid tree: per commit
-- that is one row and three b-tree pages fewer to write. Existing rows are copied as they are.
CREATE TABLE events_clustered (
    goal TEXT NOT NULL,
    revision INTEGER NOT NULL,
    at INTEGER NOT NULL,
    json TEXT NOT NULL,
    -- The receipt of the commit this row ends (NULL on other rows).
    operation TEXT,
    digest TEXT,
    commit_events INTEGER,
    PRIMARY KEY (goal, revision)
) WITHOUT ROWID;

INSERT INTO events_clustered (goal, revision, at, json)
    SELECT goal, revision, at, json FROM events ORDER BY goal, revision;
DROP TABLE events;
ALTER TABLE events_clustered RENAME TO events;

CREATE UNIQUE INDEX events_by_operation ON events (goal, operation) WHERE operation IS NOT NULL;

-- Every receipt, in the receipts table's shape, for reading. Among the receipts at one
-- revision, the one with events (the commit that made it) comes first, then no-ops by `seq`.
CREATE VIEW commits AS
    SELECT goal, operation, digest, revision, commit_events AS events, at AS committed_at,
           NULL AS actor, NULL AS kinds, NULL AS seq
        FROM events WHERE operation IS NOT NULL
    UNION ALL
    SELECT goal, operation, digest, revision, events, committed_at, actor, kinds, seq
        FROM receipts;
