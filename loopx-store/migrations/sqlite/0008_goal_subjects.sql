-- loopx store, schema 8: the subjects each goal follows, indexed by subject, so that a fact
-- from outside (a webhook delivery) is routed to the goals that follow its subject with an
-- index lookup instead of a load of every goal. Applied in one transaction; the
-- schema_version row is written by the migration runner.
--
-- A commit that changes what a goal follows (the kernel's `GoalState::watched_subjects`)
-- rewrites the goal's rows in the same transaction. The rows of goals written before this
-- schema are computed from their histories when the store is next opened: the
-- `goal_subjects` setting marks that work as pending until then, and the store writes the
-- rows and removes the mark in one transaction.
CREATE TABLE goal_subjects (
    subject TEXT NOT NULL,
    goal TEXT NOT NULL,
    PRIMARY KEY (subject, goal)
) WITHOUT ROWID;

CREATE INDEX goal_subjects_by_goal ON goal_subjects (goal);

INSERT INTO store_settings (name, value)
    SELECT 'goal_subjects', 'pending' WHERE EXISTS (SELECT 1 FROM goals);
