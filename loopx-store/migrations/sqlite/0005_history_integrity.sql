-- loopx store, schema 5: damage to a goal's history is found, and an ambiguous commit is
-- resolved by its attempt id. Applied in one transaction; the schema_version row is written
-- by the migration runner.
--
-- A load reads the goal's newest snapshot and the events after it, so an event row deleted or
-- changed below the snapshot would go unnoticed. loopx never changes an event row's goal,
-- revision, time or JSON, and deletes event rows only at or below the goal's base revision
-- (compaction records the new base first). Any other such change was made outside loopx: these
-- triggers record the lowest revision it touched in the goal row's `damaged` column, which every
-- read and write of the goal checks (reading the row costs nothing extra). The triggers fire
-- only on deletes and updates, which loopx's commits never make: a commit costs what it did.
-- A later migration that rewrites event rows must take these triggers out of the way first.
ALTER TABLE goals ADD COLUMN damaged INTEGER;

-- A change below SQL (a byte flipped on disk) fires no trigger: every event row, goal row and
-- snapshot also stores the chain head at its revision (64 hexadecimal digits; see the crate's
-- `chain` module), which every read that folds rows checks. The runner computes the chains of
-- rows written before this schema right after this script, in the same transaction.
ALTER TABLE events ADD COLUMN chain TEXT;
ALTER TABLE goals ADD COLUMN chain TEXT;
ALTER TABLE snapshots ADD COLUMN chain TEXT;

CREATE TRIGGER events_deleted_outside_loopx AFTER DELETE ON events
    WHEN OLD.revision > (SELECT base_revision FROM goals WHERE goal = OLD.goal)
BEGIN
    UPDATE goals SET damaged = min(coalesce(damaged, OLD.revision), OLD.revision)
        WHERE goal = OLD.goal;
END;

CREATE TRIGGER events_changed_outside_loopx AFTER UPDATE OF goal, revision, at, json ON events
BEGIN
    UPDATE goals SET damaged = min(coalesce(damaged, OLD.revision), OLD.revision)
        WHERE goal = OLD.goal;
    UPDATE goals SET damaged = min(coalesce(damaged, NEW.revision), NEW.revision)
        WHERE goal = NEW.goal;
END;

-- Every append draws a fresh attempt id and records it with the receipt it writes (on the
-- commit's last event row, or on the receipts row of a recorded no-op). When a commit's outcome
-- is unknown (its COMMIT failed), reading the receipt's attempt id back proves whether that
-- append wrote it or another append of the same operation did. Existing rows keep no attempt
-- id (NULL), and a receipt that compaction moves keeps none either: such a receipt is never
-- claimed by an ambiguous append. Adding nullable columns rewrites no row.
ALTER TABLE events ADD COLUMN attempt TEXT;
ALTER TABLE receipts ADD COLUMN attempt TEXT;
