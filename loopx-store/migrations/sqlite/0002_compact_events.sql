-- loopx store, schema 2. Applied in one transaction; the schema_version row is written by the
-- migration runner.
--
-- From this schema on, an event row's JSON no longer repeats the revision and time that the
-- row's own columns (revision, at) hold: it carries the kernel's schema version, the actor and
-- the fact. Rows written by schema 1, which carry both, are read as they are; nothing is
-- rewritten. A build that knows only schema 1 refuses the file (newer schema) instead of
-- misreading the new rows.

-- No query filters goals by status; the index only cost a write per commit.
DROP INDEX IF EXISTS goals_by_status;
