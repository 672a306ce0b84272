-- loopx store, schema 6: the store's own settings, one row each, written when the store is
-- created. `clock` = `test` marks a store created with a test clock: it follows the times its
-- callers give instead of bounding them by the system clock. Without the row the store bounds
-- every commit's time by the system clock plus the goal's clock skew. Applied in one
-- transaction; the schema_version row is written by the migration runner.
CREATE TABLE store_settings (
    name TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
