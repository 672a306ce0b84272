-- loopx store, schema 6: the attempt id of the append that wrote each receipt. Applied in one
-- transaction; the schema_version row is written by the migration runner.
--
-- Every append draws a fresh attempt id and records it with the receipt it writes (on the
-- commit's last event row, or on the receipts row of a recorded no-op). When a commit's outcome
-- is unknown (its COMMIT failed), reading the receipt's attempt id back proves whether that
-- append wrote it or another append of the same operation did. Existing rows keep no attempt
-- id (NULL), and a receipt that compaction moves keeps none either: such a receipt is never
-- claimed by an ambiguous append. Adding nullable columns rewrites no row.
ALTER TABLE events ADD COLUMN attempt TEXT;
ALTER TABLE receipts ADD COLUMN attempt TEXT;
