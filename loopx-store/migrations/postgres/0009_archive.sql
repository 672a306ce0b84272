-- loopx store, schema 9: compaction archives the events it takes out of a goal's kept history
-- instead of deleting them. Applied in one transaction; the schema_version row is written by
-- the migration runner.
--
-- An archived row is the event row as it was stored: its revision, time, JSON and the chain
-- head at its revision, so the archive stays verifiable (from the goal's genesis, or from the
-- snapshot its archive starts from, up to the base snapshot's chain). loopx only inserts into
-- this table; the triggers mark the goal damaged, as they do for its event rows, when a
-- statement outside loopx deletes, changes or truncates archived rows.
CREATE TABLE archived_events (
    goal TEXT NOT NULL,
    revision BIGINT NOT NULL,
    at BIGINT NOT NULL,
    json TEXT NOT NULL,
    chain TEXT,
    PRIMARY KEY (goal, revision)
);

CREATE FUNCTION loopx_mark_archive_damage() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE goals g SET damaged = LEAST(COALESCE(g.damaged, OLD.revision), OLD.revision)
        WHERE g.goal = OLD.goal;
    IF TG_OP = 'UPDATE' THEN
        UPDATE goals g SET damaged = LEAST(COALESCE(g.damaged, NEW.revision), NEW.revision)
            WHERE g.goal = NEW.goal;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER archived_events_deleted_outside_loopx AFTER DELETE ON archived_events
    FOR EACH ROW EXECUTE FUNCTION loopx_mark_archive_damage();

CREATE TRIGGER archived_events_changed_outside_loopx
    AFTER UPDATE OF goal, revision, at, json, chain ON archived_events
    FOR EACH ROW EXECUTE FUNCTION loopx_mark_archive_damage();

-- TRUNCATE fires no row trigger: it damages every goal with an archive (a compacted goal).
CREATE FUNCTION loopx_mark_archive_truncation() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE goals g SET damaged = LEAST(COALESCE(g.damaged, 1), 1) WHERE g.base_revision > 0;
    RETURN NULL;
END
$$;

CREATE TRIGGER archived_events_truncated_outside_loopx AFTER TRUNCATE ON archived_events
    FOR EACH STATEMENT EXECUTE FUNCTION loopx_mark_archive_truncation();
