-- loopx store, schema 9: compaction archives the events it takes out of a goal's kept history
-- instead of deleting them. Applied in one transaction; the schema_version row is written by
-- the migration runner.
--
-- An archived row is the event row as it was stored: its revision, time, JSON and the chain
-- head at its revision, so the archive stays verifiable (from the goal's genesis, or from the
-- snapshot its archive starts from, up to the base snapshot's chain). loopx only inserts into
-- this table; the triggers mark the goal damaged, as they do for its event rows, when a
-- statement outside loopx deletes or changes an archived row.
CREATE TABLE archived_events (
    goal TEXT NOT NULL,
    revision INTEGER NOT NULL,
    at INTEGER NOT NULL,
    json TEXT NOT NULL,
    chain TEXT,
    PRIMARY KEY (goal, revision)
) WITHOUT ROWID;

CREATE TRIGGER archived_events_deleted_outside_loopx AFTER DELETE ON archived_events
BEGIN
    UPDATE goals SET damaged = min(coalesce(damaged, OLD.revision), OLD.revision)
        WHERE goal = OLD.goal;
END;

CREATE TRIGGER archived_events_changed_outside_loopx
    AFTER UPDATE OF goal, revision, at, json, chain ON archived_events
BEGIN
    UPDATE goals SET damaged = min(coalesce(damaged, OLD.revision), OLD.revision)
        WHERE goal = OLD.goal;
    UPDATE goals SET damaged = min(coalesce(damaged, NEW.revision), NEW.revision)
        WHERE goal = NEW.goal;
END;
