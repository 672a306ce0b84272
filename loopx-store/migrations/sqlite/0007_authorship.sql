-- loopx store, schema 7: each commit keeps what it was made from. Applied in one transaction;
-- the schema_version row is written by the migration runner.
--
-- The command a commit was validated from and its actor's signature (the kernel's
-- `Authorship`, as JSON) ride with its receipt: on the commit's last event row, or on the
-- receipts row of a recorded no-op. `doctor --verify` re-checks every commit from them: the
-- signature against the keys registered at the revision before it, and the recorded events
-- against the kernel's re-execution of the command. Rows written before this schema keep none
-- (NULL): their commits are reported as unverifiable history, not as damage. Adding nullable
-- columns rewrites no row and fires no damage trigger (they watch goal, revision, at and json).
ALTER TABLE events ADD COLUMN authorship TEXT;
ALTER TABLE receipts ADD COLUMN authorship TEXT;

DROP VIEW commits;

-- As in schema 3, with each receipt's authorship.
CREATE VIEW commits AS
    SELECT goal, operation, digest, revision, commit_events AS events, at AS committed_at,
           NULL AS actor, NULL AS kinds, NULL AS seq, authorship
        FROM events WHERE operation IS NOT NULL
    UNION ALL
    SELECT goal, operation, digest, revision, events, committed_at, actor, kinds, seq, authorship
        FROM receipts;
