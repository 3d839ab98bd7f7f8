-- What the database's collation costs the event table's writes, without the network
-- (docs/BENCHMARKS.md, "Machine and versions"). Run it with psql in a database of each
-- collation to compare, for example one created with
--   CREATE DATABASE outbox_icu TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C';
-- and one with LOCALE 'C':
--   psql -d <database> -q -A -t -v n=0 -f scripts/pg-collation-cost.sql
-- n is the number of DONE rows the table holds before the measured writes. The script
-- works in a schema of its own, outbox_collation_cost, which it creates and drops, so it
-- touches no other table. The tables are those of the PostgreSQL migrations 0001-0006.
-- It prints the microseconds per event of 20,000 single-row INSERTs, then of marking
-- them DONE 20 IDs an UPDATE (the recorder's update, the IDs bound as one array; the
-- figure includes building each array, the same work in every database).
\set ON_ERROR_STOP 1
DROP SCHEMA IF EXISTS outbox_collation_cost CASCADE;
CREATE SCHEMA outbox_collation_cost;
SET search_path = outbox_collation_cost;
\ir ../core/migrations/postgres/0001_create_outbox_event.up.sql
\ir ../core/migrations/postgres/0002_ordering.up.sql
\ir ../core/migrations/postgres/0003_fallback.up.sql
\ir ../core/migrations/postgres/0004_listener.up.sql
\ir ../core/migrations/postgres/0005_admin.up.sql
\ir ../core/migrations/postgres/0006_key_index_dropped.up.sql
-- IDs in the library's form: 26 characters, time-ordered, the prefilled ones older.
INSERT INTO outbox_event (event_id, event_type, aggregate_type, aggregate_id, payload, status, available_at, created_at, done_at)
SELECT '01J' || lpad(upper(to_hex(i) COLLATE "C"), 23, '0'), 'order.placed', 'order', 'order-' || i, '{"a":1}', 1,
       now(), now() - interval '1 day' + i * interval '1 ms', now()
FROM generate_series(1, :n) i;
VACUUM ANALYZE outbox_event;
CREATE FUNCTION pg_temp.writes(k int) RETURNS TABLE(insert_us float8, done_us float8) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz; t1 timestamptz; t2 timestamptz; ids text[];
BEGIN
  t0 := clock_timestamp();
  FOR i IN 1..k LOOP
    INSERT INTO outbox_event (event_id, event_type, aggregate_type, aggregate_id, payload, status, available_at, created_at)
    VALUES ('01K' || lpad(upper(to_hex(i) COLLATE "C"), 23, '0'), 'order.placed', 'order', 'order-' || i, '{"a":1}', 0,
            now(), clock_timestamp());
  END LOOP;
  t1 := clock_timestamp();
  FOR j IN 0..(k/20 - 1) LOOP
    SELECT array_agg('01K' || lpad(upper(to_hex(i) COLLATE "C"), 23, '0')) INTO ids FROM generate_series(j*20+1, j*20+20) i;
    UPDATE outbox_event SET status = 1, done_at = now(), locked_by = NULL, locked_until = NULL
      WHERE event_id = ANY(ids) AND status IN (0, 2, 3);
  END LOOP;
  t2 := clock_timestamp();
  RETURN QUERY SELECT (extract(epoch FROM t1 - t0) * 1e6 / k)::float8, (extract(epoch FROM t2 - t1) * 1e6 / k)::float8;
END $$;
SELECT current_database() AS db, :n AS prefilled, * FROM pg_temp.writes(20000);
DROP SCHEMA outbox_collation_cost CASCADE;
