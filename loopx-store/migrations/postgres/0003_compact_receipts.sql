-- loopx store on PostgreSQL, schema 3: smaller receipts. Applied in one transaction under an
-- advisory lock; the schema_version row is written by the migration runner.
--
-- A receipt's payload digest is stored as bytes: a SHA-256 digest written as 64 lowercase hex
-- digits (what `submit` computes) as its 32 bytes; any other digest text as its UTF-8 bytes,
-- except a text of exactly 32 bytes, which is stored after one 0xff byte (never part of UTF-8)
-- so that it cannot be taken for a SHA-256 digest. Existing rows are converted in place.
ALTER TABLE receipts ALTER COLUMN digest TYPE BYTEA USING (
    CASE
        WHEN digest ~ '^[0-9a-f]{64}$' THEN decode(digest, 'hex')
        WHEN octet_length(digest) = 32 THEN '\xff'::BYTEA || convert_to(digest, 'UTF8')
        ELSE convert_to(digest, 'UTF8')
    END);

-- Receipts are looked up by operation through a 64-bit hash of its id: an entry of that index
-- is a third of one of (goal, operation), whose pages were half empty since operation ids
-- arrive in no order. Uniqueness of (goal, operation) is kept by the commit function, which
-- checks for the operation while it holds the goal's row lock (or, for a goal that does not
-- exist yet, a lock on its id).
ALTER TABLE receipts DROP CONSTRAINT receipts_goal_operation_key;
CREATE INDEX receipts_by_operation ON receipts (hashtextextended(operation, 0));

-- A receipt no longer repeats its actor and event names while its events are stored: they are
-- read from the event rows (the first event's actor, every event's type). Compaction writes
-- them into the receipts whose events it deletes, so the audit trail outlives the events.
-- Receipts written before keep theirs.
ALTER TABLE receipts ALTER COLUMN kinds DROP NOT NULL;

-- Events and the audit index only ever grow at the end of a goal's range: full pages.
ALTER INDEX events_pkey SET (fillfactor = 100);
ALTER INDEX receipts_by_revision SET (fillfactor = 100);

DROP FUNCTION loopx_append;

-- As in schema 2, with the digest as bytes, the operation found through its hash, and no actor
-- or event names written into the receipt.
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
    SELECT x.digest, x.revision, x.events, x.committed_at INTO first
        FROM receipts x
        WHERE hashtextextended(x.operation, 0) = hashtextextended(p_operation, 0)
          AND x.goal = p_goal AND x.operation = p_operation;
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
        INSERT INTO events (goal, revision, at, json)
            SELECT p_goal, e.r, e.a, e.j
            FROM unnest(p_event_revisions, p_event_times, p_event_json) AS e(r, a, j);
    END IF;
    INSERT INTO receipts (goal, operation, digest, revision, events, committed_at)
        VALUES (p_goal, p_operation, p_digest, p_revision, p_count, p_at);
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
