-- loopx store on PostgreSQL, schema 2. Applied in one transaction under an advisory lock; the
-- schema_version row is written by the migration runner.
--
-- From this schema on, an event row's JSON no longer repeats the revision and time that the
-- row's own columns (revision, at) hold: it carries the kernel's schema version, the actor and
-- the fact. Rows written by schema 1, which carry both, are read as they are; nothing is
-- rewritten. A build that knows only schema 1 refuses the database (newer schema) instead of
-- misreading the new rows.

-- No query filters goals by status; the index only cost a write per commit.
DROP INDEX IF EXISTS goals_by_status;

-- Receipts are read by goal and operation (idempotency, its unique index) and by goal in
-- commit order (the audit trail). Within a goal, commit order is (revision, seq): commits of
-- one goal queue on its row, so revisions never go back as seq grows. The primary key on seq
-- alone served no query; it goes, and the audit index carries seq.
ALTER TABLE receipts DROP CONSTRAINT receipts_pkey;
DROP INDEX receipts_by_revision;
CREATE INDEX receipts_by_revision ON receipts (goal, revision, seq);

-- Room on each page for the goal and frontier rows' new versions, so that an update that
-- changes no indexed column stays on its page (a heap-only tuple) and is pruned in place.
ALTER TABLE goals SET (fillfactor = 50);
ALTER TABLE frontier SET (fillfactor = 70);

-- One commit in one call, so a commit costs one statement: lock the goal's row, check the
-- operation id, then the expected revision, then write the events, the receipt, a snapshot
-- when one is given, the agents when they changed, the frontier rows that changed, and the
-- notification. The caller runs it inside its own transaction.
--
-- Returns one row: outcome 0 = committed (the receipt's fields echo the input); 1 = the
-- operation had already committed (its first receipt; nothing written); 2 = the goal is not at
-- the expected revision (revision = where it stands; nothing written). A concurrent creation of
-- the same goal fails on the goals primary key (unique violation), as before.
CREATE FUNCTION loopx_append(
    p_goal TEXT,
    p_expected BIGINT,
    p_operation TEXT,
    p_digest TEXT,
    p_revision BIGINT,
    p_count BIGINT,
    p_at BIGINT,
    p_actor TEXT,
    p_kinds TEXT,
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
    r_digest TEXT,
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
    SELECT x.digest, x.revision, x.events, x.committed_at INTO first
        FROM receipts x WHERE x.goal = p_goal AND x.operation = p_operation;
    IF FOUND THEN
        RETURN QUERY SELECT 1, first.digest, first.revision, first.events, first.committed_at;
        RETURN;
    END IF;
    IF COALESCE(g_revision, 0) <> p_expected THEN
        RETURN QUERY SELECT 2, NULL::TEXT, COALESCE(g_revision, 0), 0::BIGINT, 0::BIGINT;
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
        INSERT INTO events (goal, revision, at, json)
            SELECT p_goal, e.r, e.a, e.j
            FROM unnest(p_event_revisions, p_event_times, p_event_json) AS e(r, a, j);
    END IF;
    INSERT INTO receipts (goal, operation, digest, revision, events, committed_at, actor, kinds)
        VALUES (p_goal, p_operation, p_digest, p_revision, p_count, p_at, p_actor, p_kinds);
    IF p_count = 0 THEN
        -- A recorded no-op changes nothing but its receipt, and wakes nobody.
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
