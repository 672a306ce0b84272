-- loopx store, schema 4: a goal's frontier rows side by side. Applied in one transaction; the
-- schema_version row is written by the migration runner.
--
-- The frontier table was clustered on (agent, goal), so a commit that changed the frontier of
-- every agent registered with a goal (a claim or a settlement does) wrote one page per agent.
-- Clustered on (goal, agent), those rows share a page; the cross-goal query for one agent goes
-- through an index on (agent, goal), whose entries change only when a row is added or removed,
-- never when a frontier is rewritten. Existing rows are copied as they are.
CREATE TABLE frontier_clustered (
    goal TEXT NOT NULL,
    agent TEXT NOT NULL,
    todos TEXT NOT NULL,
    PRIMARY KEY (goal, agent)
) WITHOUT ROWID;

INSERT INTO frontier_clustered (goal, agent, todos)
    SELECT goal, agent, todos FROM frontier ORDER BY goal, agent;
DROP TABLE frontier;
ALTER TABLE frontier_clustered RENAME TO frontier;

CREATE INDEX frontier_by_agent ON frontier (agent, goal);
