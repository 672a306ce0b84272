-- loopx store, schema 10: a compacted commit's receipt is kept as its digest. Applied in one
-- transaction; the schema_version row is written by the migration runner.
--
-- Compaction writes the receipt of a commit it archives without the commit's authorship (the
-- command and its signature, what `doctor --verify` re-checks): the authorship moves into the
-- goal's archive with the commit's last event row. The receipts table, which every commit's
-- operation-id check reads, then holds per compacted commit its operation id, digest, revision,
-- time, actor and event names only; the `commits` view, which the audit trail and verification
-- read, finds the authorship in the archive. Receipts compacted before this schema keep theirs
-- where they are. Adding a nullable column rewrites no row and fires no damage trigger.
ALTER TABLE archived_events ADD COLUMN authorship TEXT;

DROP VIEW commits;

-- As in schema 7, reading a compacted commit's authorship from the archive.
CREATE VIEW commits AS
    SELECT goal, operation, digest, revision, commit_events AS events, at AS committed_at,
           NULL AS actor, NULL AS kinds, NULL AS seq, authorship
        FROM events WHERE operation IS NOT NULL
    UNION ALL
    SELECT r.goal, r.operation, r.digest, r.revision, r.events, r.committed_at, r.actor, r.kinds,
           r.seq, coalesce(r.authorship, (SELECT a.authorship FROM archived_events a
                                          WHERE a.goal = r.goal AND a.revision = r.revision))
        FROM receipts r;
