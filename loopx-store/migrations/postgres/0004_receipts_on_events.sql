-- loopx store on PostgreSQL, schema 4: a commit's receipt on its last event row. Applied in one
-- transaction under an advisory lock; the schema_version row is written by the migration runner.
--
-- A commit that moves the goal no longer writes a receipt row of its own: its operation id,
-- payload digest and event count ride on its last event row (whose revision and time are the
-- receipt's), found by operation through a partial index on the hash of the id. The receipts
-- table keeps recorded no-ops, the receipts written before this schema, and the receipts of
-- events that compaction deletes (moved there first, with their actor and event names). Per
-- commit that is one row and two index entries fewer. Existing rows are not rewritten.
ALTER TABLE events
    ADD COLUMN operation TEXT,
    ADD COLUMN digest BYTEA,
    ADD COLUMN commit_events BIGINT;

CREATE INDEX events_by_operation ON events (hashtextextended(operation, 0))
    WHERE operation IS NOT NULL;

-- Every receipt, in the receipts table's shape, for reading. `seq` orders receipts at one
-- revision; it is NULL on an event row, whose receipt is the first at its revision (the commit
-- that made it), so it sorts first.
CREATE VIEW commits AS
    SELECT goal, operation, digest, revision, commit_events AS events, at AS committed_at,
           NULL::TEXT AS actor, NULL::TEXT AS kinds, NULL::BIGINT AS seq
        FROM events WHERE operation IS NOT NULL
    UNION ALL
    SELECT goal, operation, digest, revision, events, committed_at, actor, kinds, seq
        FROM receipts;

DROP FUNCTION loopx_append;

-- As in schema 3, with the receipt of a commit that moves the goal on its last event row.
CREATE FUNCTION loopx_append(
    p_goal TEXT,
    p_expected BIGINT,
    p_operation TEXT,
    p_digest BYTEA,
    p_revision BIGINT,
    p_count BIGINT,
    p_at BIGINT,
    p_event_revisions BIGINT[],
    p_event_times BIGINT[],
    p_event_json TEXT[],
    p_objective TEXT,
    p_status TEXT,
    p_valid_from BIGINT,
    p_valid_until BIGINT,
    p_snapshot TEXT,
    p_agents TEXT[],
    p_frontier_agents TEXT[],
    p_frontier_todos TEXT[],
    p_channel TEXT,
    p_note TEXT
) RETURNS TABLE (
    r_outcome INTEGER,
    r_digest BYTEA,
    r_revision BIGINT,
    r_events BIGINT,
    r_committed_at BIGINT
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    g_found BOOLEAN;
    g_revision BIGINT;
    g_base BIGINT;
    g_snapshot BIGINT;
    first RECORD;
BEGIN
    SELECT g.revision, g.base_revision, g.snapshot_revision
        INTO g_revision, g_base, g_snapshot
        FROM goals g WHERE g.goal = p_goal FOR UPDATE;
    g_found := FOUND;
    IF NOT g_found THEN
        -- No row to lock yet: commits to a goal that does not exist queue on a lock of their
        -- own, so that two of them cannot both record the same operation.
        PERFORM pg_advisory_xact_lock(1819242352, hashtext(p_goal));
    END IF;
    SELECT x.digest, x.revision, x.commit_events AS events, x.at AS committed_at INTO first
        FROM events x
        WHERE hashtextextended(x.operation, 0) = hashtextextended(p_operation, 0)
          AND x.operation IS NOT NULL AND x.goal = p_goal AND x.operation = p_operation;
    IF NOT FOUND THEN
        SELECT x.digest, x.revision, x.events, x.committed_at INTO first
            FROM receipts x
            WHERE hashtextextended(x.operation, 0) = hashtextextended(p_operation, 0)
              AND x.goal = p_goal AND x.operation = p_operation;
    END IF;
    IF FOUND THEN
        RETURN QUERY SELECT 1, first.digest, first.revision, first.events, first.committed_at;
        RETURN;
    END IF;
    IF COALESCE(g_revision, 0) <> p_expected THEN
        RETURN QUERY SELECT 2, NULL::BYTEA, COALESCE(g_revision, 0), 0::BIGINT, 0::BIGINT;
        RETURN;
    END IF;
    IF p_count > 0 THEN
        -- The goal row first: a concurrent creator of the same goal fails here.
        IF g_found THEN
            UPDATE goals g SET revision = p_revision, objective = p_objective,
                status = p_status, valid_from = p_valid_from, valid_until = p_valid_until,
                updated_at = p_at,
                snapshot_revision = CASE WHEN p_snapshot IS NULL THEN g.snapshot_revision
                                         ELSE p_revision END
                WHERE g.goal = p_goal;
        ELSE
            INSERT INTO goals (goal, revision, objective, status, valid_from, valid_until,
                               updated_at, base_revision, snapshot_revision)
                VALUES (p_goal, p_revision, p_objective, p_status, p_valid_from, p_valid_until,
                        p_at, 0, CASE WHEN p_snapshot IS NULL THEN 0 ELSE p_revision END);
        END IF;
        -- The receipt rides on the commit's last event row.
        INSERT INTO events (goal, revision, at, json, operation, digest, commit_events)
            SELECT p_goal, e.r, e.a, e.j,
                   CASE WHEN e.r = p_revision THEN p_operation END,
                   CASE WHEN e.r = p_revision THEN p_digest END,
                   CASE WHEN e.r = p_revision THEN p_count END
            FROM unnest(p_event_revisions, p_event_times, p_event_json) AS e(r, a, j);
    ELSE
        -- A recorded no-op changes nothing but its receipt, and wakes nobody.
        INSERT INTO receipts (goal, operation, digest, revision, events, committed_at)
            VALUES (p_goal, p_operation, p_digest, p_revision, p_count, p_at);
        RETURN QUERY SELECT 0, p_digest, p_revision, p_count, p_at;
        RETURN;
    END IF;
    IF p_snapshot IS NOT NULL THEN
        INSERT INTO snapshots (goal, revision, json) VALUES (p_goal, p_revision, p_snapshot)
            ON CONFLICT (goal, revision) DO UPDATE SET json = excluded.json;
        DELETE FROM snapshots s
            WHERE s.goal = p_goal AND s.revision < p_revision
              AND s.revision <> COALESCE(g_base, 0);
    END IF;
    IF p_agents IS NOT NULL THEN
        DELETE FROM goal_agents a WHERE a.goal = p_goal;
        INSERT INTO goal_agents (agent, goal) SELECT x.a, p_goal FROM unnest(p_agents) AS x(a);
    END IF;
    -- Only the frontier rows that changed are written.
    DELETE FROM frontier f WHERE f.goal = p_goal AND f.agent <> ALL (p_frontier_agents);
    INSERT INTO frontier AS f (agent, goal, todos)
        SELECT x.a, p_goal, x.t FROM unnest(p_frontier_agents, p_frontier_todos) AS x(a, t)
        ON CONFLICT (agent, goal) DO UPDATE SET todos = excluded.todos
        WHERE f.todos IS DISTINCT FROM excluded.todos;
    -- Delivered to listeners only if, and when, the caller's transaction commits.
    PERFORM pg_notify(p_channel, p_note);
    RETURN QUERY SELECT 0, p_digest, p_revision, p_count, p_at;
END
$$;
