-- loopx store, schema 8: the subjects each goal follows, indexed by subject, so that a fact
-- from outside (a webhook delivery) is routed to the goals that follow its subject with an
-- index lookup instead of a load of every goal. Applied in one transaction; the
-- schema_version row is written by the migration runner.
--
-- A commit that changes what a goal follows (the kernel's `GoalState::watched_subjects`)
-- rewrites the goal's rows inside `loopx_append`. The rows of goals written before this
-- schema are computed from their histories when a host next connects: the `goal_subjects`
-- setting marks that work as pending until then, and the host writes the rows and removes
-- the mark in one transaction (each goal's row locked as it is indexed).
CREATE TABLE goal_subjects (
    subject TEXT NOT NULL,
    goal TEXT NOT NULL,
    PRIMARY KEY (subject, goal)
);

CREATE INDEX goal_subjects_by_goal ON goal_subjects (goal);

INSERT INTO store_settings (name, value)
    SELECT 'goal_subjects', 'pending' WHERE EXISTS (SELECT 1 FROM goals);

-- The append function is redefined by every migration that changes what a commit writes.
DROP FUNCTION loopx_append;

-- As in schema 7, also rewriting the goal's followed subjects when they changed
-- (`p_subjects`: the new set; NULL when they did not change).
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
    p_note TEXT,
    p_attempt TEXT,
    p_authorship TEXT,
    p_subjects TEXT[]
) RETURNS TABLE (
    r_outcome INTEGER,
    r_digest BYTEA,
    r_revision BIGINT,
    r_events BIGINT,
    r_committed_at BIGINT,
    r_chain TEXT
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    g_found BOOLEAN;
    g_revision BIGINT;
    g_base BIGINT;
    g_snapshot BIGINT;
    g_damaged BIGINT;
    g_chain TEXT;
    h BYTEA;
    chains TEXT[];
    first RECORD;
BEGIN
    SELECT g.revision, g.base_revision, g.snapshot_revision, g.damaged, g.chain
        INTO g_revision, g_base, g_snapshot, g_damaged, g_chain
        FROM goals g WHERE g.goal = p_goal FOR UPDATE;
    g_found := FOUND;
    IF g_damaged IS NOT NULL THEN
        -- A damaged history is neither read nor written: the revision it is damaged at.
        RETURN QUERY SELECT 3, NULL::BYTEA, g_damaged, 0::BIGINT, 0::BIGINT, NULL::TEXT;
        RETURN;
    END IF;
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
        RETURN QUERY SELECT 1, first.digest, first.revision, first.events, first.committed_at,
            NULL::TEXT;
        RETURN;
    END IF;
    IF COALESCE(g_revision, 0) <> p_expected THEN
        RETURN QUERY SELECT 2, NULL::BYTEA, COALESCE(g_revision, 0), 0::BIGINT, 0::BIGINT,
            NULL::TEXT;
        RETURN;
    END IF;
    IF p_count > 0 THEN
        IF NOT g_found THEN
            h := sha256(convert_to('loopx.chain.v1' || E'\n' || p_goal, 'UTF8'));
        ELSIF g_chain ~ '^[0-9a-f]{64}$' THEN
            h := decode(g_chain, 'hex');
        ELSE
            -- No head to chain on: the goal row was changed outside loopx.
            RETURN QUERY SELECT 3, NULL::BYTEA, g_revision, 0::BIGINT, 0::BIGINT, NULL::TEXT;
            RETURN;
        END IF;
        chains := ARRAY[]::TEXT[];
        FOR i IN 1 .. COALESCE(array_length(p_event_revisions, 1), 0) LOOP
            h := sha256(h || convert_to(E'\n' || p_event_revisions[i]::text || E'\n'
                || p_event_times[i]::text || E'\n' || p_event_json[i], 'UTF8'));
            chains := chains || encode(h, 'hex');
        END LOOP;
        -- The goal row first: a concurrent creator of the same goal fails here.
        IF g_found THEN
            UPDATE goals g SET revision = p_revision, objective = p_objective, chain = encode(h, 'hex'),
                status = p_status, valid_from = p_valid_from, valid_until = p_valid_until,
                updated_at = p_at,
                snapshot_revision = CASE WHEN p_snapshot IS NULL THEN g.snapshot_revision
                                         ELSE p_revision END
                WHERE g.goal = p_goal;
        ELSE
            INSERT INTO goals (goal, revision, objective, status, valid_from, valid_until,
                               updated_at, base_revision, snapshot_revision, chain)
                VALUES (p_goal, p_revision, p_objective, p_status, p_valid_from, p_valid_until,
                        p_at, 0, CASE WHEN p_snapshot IS NULL THEN 0 ELSE p_revision END,
                        encode(h, 'hex'));
        END IF;
        -- The receipt rides on the commit's last event row.
        INSERT INTO events (goal, revision, at, json, operation, digest, commit_events, attempt, chain,
                            authorship)
            SELECT p_goal, e.r, e.a, e.j,
                   CASE WHEN e.r = p_revision THEN p_operation END,
                   CASE WHEN e.r = p_revision THEN p_digest END,
                   CASE WHEN e.r = p_revision THEN p_count END,
                   CASE WHEN e.r = p_revision THEN p_attempt END,
                   e.c,
                   CASE WHEN e.r = p_revision THEN p_authorship END
            FROM unnest(p_event_revisions, p_event_times, p_event_json, chains) AS e(r, a, j, c);
    ELSE
        -- A recorded no-op changes nothing but its receipt, and wakes nobody.
        INSERT INTO receipts (goal, operation, digest, revision, events, committed_at, attempt,
                              authorship)
            VALUES (p_goal, p_operation, p_digest, p_revision, p_count, p_at, p_attempt,
                    p_authorship);
        RETURN QUERY SELECT 0, p_digest, p_revision, p_count, p_at, NULL::TEXT;
        RETURN;
    END IF;
    IF p_snapshot IS NOT NULL THEN
        INSERT INTO snapshots (goal, revision, json, chain)
            VALUES (p_goal, p_revision, p_snapshot, encode(h, 'hex'))
            ON CONFLICT (goal, revision) DO UPDATE SET json = excluded.json, chain = excluded.chain;
        DELETE FROM snapshots s
            WHERE s.goal = p_goal AND s.revision < p_revision
              AND s.revision <> COALESCE(g_base, 0);
    END IF;
    IF p_agents IS NOT NULL THEN
        DELETE FROM goal_agents a WHERE a.goal = p_goal;
        INSERT INTO goal_agents (agent, goal) SELECT x.a, p_goal FROM unnest(p_agents) AS x(a);
    END IF;
    IF p_subjects IS NOT NULL THEN
        DELETE FROM goal_subjects s WHERE s.goal = p_goal;
        INSERT INTO goal_subjects (subject, goal)
            SELECT DISTINCT x.s, p_goal FROM unnest(p_subjects) AS x(s);
    END IF;
    -- Only the frontier rows that changed are written.
    DELETE FROM frontier f WHERE f.goal = p_goal AND f.agent <> ALL (p_frontier_agents);
    INSERT INTO frontier AS f (agent, goal, todos)
        SELECT x.a, p_goal, x.t FROM unnest(p_frontier_agents, p_frontier_todos) AS x(a, t)
        ON CONFLICT (agent, goal) DO UPDATE SET todos = excluded.todos
        WHERE f.todos IS DISTINCT FROM excluded.todos;
    -- Delivered to listeners only if, and when, the caller's transaction commits.
    PERFORM pg_notify(p_channel, p_note);
    RETURN QUERY SELECT 0, p_digest, p_revision, p_count, p_at, encode(h, 'hex');
END
$$;

-- The clocked append (schema 6) passes the subjects through to it.
DROP FUNCTION loopx_append_clocked;

-- As in schema 7, with the goal's followed subjects.
CREATE FUNCTION loopx_append_clocked(
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
    p_note TEXT,
    p_attempt TEXT,
    p_skew BIGINT,
    p_authorship TEXT,
    p_subjects TEXT[]
) RETURNS TABLE (
    r_outcome INTEGER,
    r_digest BYTEA,
    r_revision BIGINT,
    r_events BIGINT,
    r_committed_at BIGINT,
    r_chain TEXT
)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    server_ms BIGINT := floor(extract(epoch FROM now()) * 1000)::BIGINT;
    latest BIGINT;
    first RECORD;
BEGIN
    SELECT GREATEST(p_at, max(t)) INTO latest FROM unnest(p_event_times) AS x(t);
    IF COALESCE(latest, p_at) > server_ms + p_skew
       AND NOT EXISTS (SELECT 1 FROM store_settings s WHERE s.name = 'clock' AND s.value = 'test')
    THEN
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
            RETURN QUERY SELECT 1, first.digest, first.revision, first.events,
                first.committed_at, NULL::TEXT;
            RETURN;
        END IF;
        RETURN QUERY SELECT 4, NULL::BYTEA, 0::BIGINT, 0::BIGINT, server_ms, NULL::TEXT;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM loopx_append(p_goal, p_expected, p_operation, p_digest,
        p_revision, p_count, p_at, p_event_revisions, p_event_times, p_event_json, p_objective,
        p_status, p_valid_from, p_valid_until, p_snapshot, p_agents, p_frontier_agents,
        p_frontier_todos, p_channel, p_note, p_attempt, p_authorship, p_subjects);
END
$$;
