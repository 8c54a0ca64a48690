-- results.sqlite: one run's records, written as each case finishes.
-- The same text is compiled into runner/evidence/store.c (a test checks they are identical).
PRAGMA user_version = 1;
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY,  -- 'schema_version', 'state' (running|complete|incomplete), 'manifest' (JSON)
  value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
  id      INTEGER PRIMARY KEY,  -- order in which cases finished, from 1
  suite   TEXT NOT NULL,
  case_id TEXT NOT NULL,
  path    TEXT NOT NULL,
  status  TEXT NOT NULL CHECK (status IN ('pass','fail','not_supported','error','not_run')),
  reason  TEXT NOT NULL,
  json    TEXT NOT NULL,        -- the whole record, as it appears in results.json (compact)
  UNIQUE (suite, case_id, path)
);
CREATE TABLE IF NOT EXISTS metrics (
  record_id INTEGER NOT NULL REFERENCES records(id),
  name      TEXT NOT NULL,
  unit      TEXT NOT NULL,
  value     REAL,               -- NULL when not finite
  derive    TEXT NOT NULL,
  better    TEXT NOT NULL,
  n_samples INTEGER NOT NULL,
  PRIMARY KEY (record_id, name)
);
