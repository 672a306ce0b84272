-- loopx store on PostgreSQL, schema 6: the store's own settings, and commit times bounded by
-- the server's clock. Applied in one transaction under an advisory lock; the schema_version row
-- is written by the migration runner.
--
-- One row per setting, written when the store is created. `clock` = `test` marks a store
-- created with a test clock: it follows the times its callers give. Without the row every
-- commit's time is bounded by the server's `now()` plus the goal's clock skew.
CREATE TABLE store_settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- `loopx_append` (schema 5) behind the clock: a commit whose latest time (its own or any of
-- its events') is later than `now()` plus `p_skew` milliseconds writes nothing and answers
-- outcome 4 with the server's time in `r_committed_at` -- unless the operation already
-- committed, which answers its first receipt (outcome 1) as `loopx_append` does, or the store
-- runs on a test clock. Everything else is `loopx_append`'s, in the same (implicit)
-- transaction: still one statement per commit.
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
    p_skew BIGINT
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
        p_frontier_todos, p_channel, p_note, p_attempt);
END
$$;
