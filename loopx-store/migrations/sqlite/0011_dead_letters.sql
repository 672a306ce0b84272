-- loopx store, schema 11: dead letters. A provider's fact that a goal refused to record (a
-- webhook delivery or a poll) is kept here, beside the goals, until it is re-applied or a
-- person dismisses it, so that nothing from outside is lost without a trace. One row per goal
-- and operation; the letter itself is one JSON document (the kernel's `DeadLetter`). Applied
-- in one transaction; the schema_version row is written by the migration runner.
CREATE TABLE dead_letters (
    goal TEXT NOT NULL,
    operation TEXT NOT NULL,
    first_refused INTEGER NOT NULL,
    letter TEXT NOT NULL,
    PRIMARY KEY (goal, operation)
) WITHOUT ROWID;

CREATE INDEX dead_letters_by_time ON dead_letters (first_refused, goal, operation);
