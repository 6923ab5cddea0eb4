-- Queue schema, version 11: the finished history is a ring of segments that retention
-- truncates, never a table that pruning deletes from. {schema} is the quoted, validated schema
-- name.
--
-- Pruning `done` with DELETE left a dead row version per pruned job, which only VACUUM
-- removes: under sustained load with a short retention, `done` gathered dead tuples by the
-- hundred thousand. Now:
-- - `done` is LIST-partitioned into 16 segments; a row's segment is the history clock's
--   (`done_clock`) value modulo 16, read by the column's DEFAULT, so the statements that
--   finish jobs are unchanged. Retention moves the clock to the next segment once the current
--   one is older than a span it chooses from the retention window, and only into a segment
--   that is free (truncated).
-- - Pruning a queue's finished jobs (`Queue::prune`) records a cutoff per (queue, state)
--   (`done_cutoffs`, queue '' for every queue): the jobs that finished before it are gone
--   for every reader at once (the view all_jobs, stats, keys freed), but stay on disk until
--   their segment is truncated, which happens once every job in it is past its cutoff.
-- - The sealed counts of stats are kept per segment too (`done_counts.seg`), so truncating a
--   segment takes its counts with it and the counts stay exact.
-- Dead letters are still pruned by DELETE: they are written at the rate of final failures,
-- and each one is retried or purged on its own.
--
-- A process of an earlier version keeps claiming and finishing jobs (its INSERTs into done get
-- the segment from the DEFAULT); its sealing of the counts and its pruning fail until it is
-- upgraded.

DROP VIEW {schema}.all_jobs;
ALTER TABLE {schema}.done RENAME TO done_v10;
ALTER INDEX {schema}.done_pkey RENAME TO done_v10_pkey;
ALTER INDEX {schema}.done_recent RENAME TO done_v10_recent;
ALTER INDEX {schema}.done_xid RENAME TO done_v10_xid;

-- The history's clock: its value modulo 16 is the segment that finished jobs go to.
CREATE SEQUENCE {schema}.done_clock MINVALUE 0 START 0;
SELECT nextval('{schema}.done_clock');

-- The segment finished jobs go to now. pg_sequence_last_value needs only USAGE on the clock,
-- which every role that finishes jobs has.
CREATE FUNCTION {schema}.done_seg() RETURNS smallint LANGUAGE sql STABLE AS $fn$
    SELECT (pg_sequence_last_value('{schema}.done_clock'::regclass) % 16)::smallint
$fn$;

CREATE TABLE {schema}.done (
    id              bigint      NOT NULL,
    queue           text        NOT NULL,
    state           text        NOT NULL CHECK (state IN ('done', 'cancelled')),
    priority        smallint    NOT NULL,
    run_at          timestamptz NOT NULL,
    payload         jsonb       NOT NULL,
    attempt         integer     NOT NULL,
    max_attempts    integer     NOT NULL,
    idempotency_key text,
    worker          text,
    created_at      timestamptz NOT NULL,
    last_error      text,
    errors          jsonb       NOT NULL,
    finished_at     timestamptz NOT NULL DEFAULT now(),
    -- The transaction that finished the job: counts are sealed up to the oldest transaction
    -- still running, so a late commit is never missed (seal_done.sql).
    xid             xid8        NOT NULL DEFAULT pg_current_xact_id(),
    seg             smallint    NOT NULL DEFAULT {schema}.done_seg(),
    PRIMARY KEY (id, seg)
) PARTITION BY LIST (seg);
CREATE INDEX done_recent ON {schema}.done (queue, state, finished_at);
CREATE INDEX done_xid ON {schema}.done (xid);

DO $ring$
BEGIN
    FOR i IN 0..15 LOOP
        EXECUTE format('CREATE TABLE %s.done_%s PARTITION OF %s.done FOR VALUES IN (%s)',
                       '{schema}', i, '{schema}', i);
    END LOOP;
END
$ring$;

-- The history so far goes to segment 0, the current one.
INSERT INTO {schema}.done (id, queue, state, priority, run_at, payload, attempt, max_attempts,
                           idempotency_key, worker, created_at, last_error, errors,
                           finished_at, xid, seg)
SELECT id, queue, state, priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors, finished_at, xid, 0
  FROM {schema}.done_v10;

-- Each segment's life: opened when the clock moved onto it, closed when it moved on; both
-- NULL while it is free (truncated, or never written).
CREATE TABLE {schema}.done_segments (
    seg       smallint    PRIMARY KEY CHECK (seg BETWEEN 0 AND 15),
    opened_at timestamptz,
    closed_at timestamptz
);
INSERT INTO {schema}.done_segments (seg, opened_at)
SELECT s, CASE WHEN s = 0 THEN now() END FROM generate_series(0, 15) s;

-- The retention cutoffs: a job of `queue` that finished in `state` before `before`, in a
-- transaction that the snapshot `seen` sees, is pruned (gone for readers, on disk until its
-- segment is truncated). `seen` is the snapshot of the prune that set the cutoff, so a job is
-- pruned only by a pruner that saw it: that one counts it, frees its key and takes it out of
-- the sealed counts, and a job whose transaction commits later waits for the next prune.
-- Queue '' is every queue; a job is pruned if its queue's cutoff or that one prunes it.
CREATE TABLE {schema}.done_cutoffs (
    queue  text        NOT NULL,
    state  text        NOT NULL CHECK (state IN ('done', 'cancelled')),
    before timestamptz NOT NULL,
    seen   pg_snapshot NOT NULL,
    PRIMARY KEY (queue, state)
);

-- The sealed counts, now by segment as well: truncating a segment deletes its counts. They
-- count only jobs not pruned: pruning subtracts the sealed jobs it prunes, and sealing skips
-- the pruned ones.
ALTER TABLE {schema}.done_counts ADD COLUMN seg smallint NOT NULL DEFAULT 0;
ALTER TABLE {schema}.done_counts ALTER COLUMN seg DROP DEFAULT;
ALTER TABLE {schema}.done_counts DROP CONSTRAINT done_counts_pkey;
ALTER TABLE {schema}.done_counts ADD PRIMARY KEY (queue, state, seg, bucket);

-- Every job whatever its stage, in the columns of version 3 (Queue::job, Queue::list); a
-- pruned job is not one.
CREATE VIEW {schema}.all_jobs AS
SELECT id, queue, CASE WHEN run_at > now() THEN 'scheduled' ELSE 'ready' END AS state,
       priority, run_at, payload, attempt, max_attempts, idempotency_key, NULL::text AS worker,
       created_at, last_error, errors, NULL::timestamptz AS finished_at,
       NULL::timestamptz AS lease_until
  FROM {schema}.ready
UNION ALL
SELECT id, queue, CASE WHEN run_at > now() THEN 'scheduled' ELSE 'ready' END, priority,
       run_at, payload, attempt, max_attempts, idempotency_key, NULL, created_at, last_error,
       errors, NULL, NULL
  FROM {schema}.scheduled
UNION ALL
SELECT id, queue, 'running', priority, run_at, payload, attempt, max_attempts,
       idempotency_key, worker, created_at, last_error, errors, NULL, lease_until
  FROM {schema}.leases
UNION ALL
SELECT id, queue, state, priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors, finished_at, NULL
  FROM {schema}.done d
 WHERE NOT EXISTS (SELECT 1 FROM {schema}.done_cutoffs c
                    WHERE c.queue IN (d.queue, '') AND c.state = d.state
                      AND d.finished_at < c.before AND pg_visible_in_snapshot(d.xid, c.seen))
UNION ALL
SELECT id, queue, 'dead', priority, run_at, payload, attempt, max_attempts, idempotency_key,
       worker, created_at, last_error, errors, finished_at, NULL
  FROM {schema}.dead;

-- Retention's upkeep of the ring, one process at a time (the others return 0 at once):
-- 1. repairs the segments' records from the clock (a rotation cut off between moving the
--    clock and recording it);
-- 2. moves the clock to the next segment when the current one was opened more than `span`
--    seconds ago and the next one is free;
-- 3. truncates each closed segment none of whose jobs is visible any more: every job in it
--    finished before its cutoff. A segment whose sealed counts show a visible job is skipped
--    without a look; the others are locked ACCESS EXCLUSIVE (NOWAIT when `wait_ms` is 0,
--    else waiting up to `wait_ms`), looked at, and truncated with their counts, or let go at
--    once (a subtransaction rolled back). Only readers of the history and late writers of a
--    just-closed segment ever wait for that lock: the statements that finish jobs write to
--    the current segment.
-- Returns the number of segments truncated.
CREATE FUNCTION {schema}.retire_history(span float8, class integer, wait_ms integer)
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $fn$
DECLARE
    cur smallint;
    nxt smallint;
    k smallint;
    segment text;
    visible boolean;
    truncated integer := 0;
BEGIN
    IF span IS NULL OR span < 0 THEN
        RAISE EXCEPTION 'span % is not a number of seconds', span;
    END IF;
    IF wait_ms IS NULL OR wait_ms NOT BETWEEN 0 AND 1000 THEN
        RAISE EXCEPTION 'wait_ms % is not from 0 to 1000', wait_ms;
    END IF;
    IF NOT pg_try_advisory_xact_lock(class, hashtext('{schema}.history')) THEN
        RETURN 0;
    END IF;
    cur := (pg_sequence_last_value('{schema}.done_clock'::regclass) % 16)::smallint;
    UPDATE {schema}.done_segments SET opened_at = now(), closed_at = NULL
     WHERE seg = cur AND (opened_at IS NULL OR closed_at IS NOT NULL);
    UPDATE {schema}.done_segments SET closed_at = now()
     WHERE seg <> cur AND opened_at IS NOT NULL AND closed_at IS NULL;

    nxt := (cur + 1) % 16;
    IF EXISTS (SELECT 1 FROM {schema}.done_segments
                WHERE seg = cur AND opened_at < now() - make_interval(secs => span))
       AND EXISTS (SELECT 1 FROM {schema}.done_segments
                    WHERE seg = nxt AND opened_at IS NULL) THEN
        UPDATE {schema}.done_segments SET opened_at = clock_timestamp() WHERE seg = nxt;
        PERFORM nextval('{schema}.done_clock');
        UPDATE {schema}.done_segments SET closed_at = clock_timestamp() WHERE seg = cur;
        cur := nxt;
    END IF;

    IF wait_ms > 0 THEN
        PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
    END IF;
    FOR k IN
        SELECT s.seg FROM {schema}.done_segments s
         WHERE s.closed_at IS NOT NULL AND s.seg <> cur
           AND NOT EXISTS (SELECT 1 FROM {schema}.done_counts c WHERE c.seg = s.seg AND c.n > 0)
         ORDER BY s.closed_at
    LOOP
        segment := format('%s.%I', '{schema}', 'done_' || k);
        -- A subtransaction: raising in it rolls it back and releases the segment's lock.
        BEGIN
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE%s', segment,
                           CASE WHEN wait_ms = 0 THEN ' NOWAIT' ELSE '' END);
            EXECUTE format(
                'SELECT EXISTS (SELECT 1 FROM %s d WHERE NOT EXISTS ('
                '    SELECT 1 FROM {schema}.done_cutoffs c'
                '     WHERE c.queue IN (d.queue, %L) AND c.state = d.state'
                '       AND d.finished_at < c.before AND pg_visible_in_snapshot(d.xid, c.seen)))', segment, '')
                INTO STRICT visible;
            IF visible THEN
                RAISE EXCEPTION USING ERRCODE = 'LWBSY', MESSAGE = 'segment holds visible jobs';
            END IF;
            EXECUTE 'TRUNCATE ' || segment;
            DELETE FROM {schema}.done_counts WHERE seg = k;
            UPDATE {schema}.done_segments SET opened_at = NULL, closed_at = NULL WHERE seg = k;
            truncated := truncated + 1;
        EXCEPTION
            WHEN lock_not_available OR SQLSTATE 'LWBSY' THEN
                NULL;
        END;
    END LOOP;
    RETURN truncated;
END
$fn$;
REVOKE EXECUTE ON FUNCTION {schema}.retire_history(float8, integer, integer) FROM PUBLIC;

-- Privileges: an application user granted what the docs give on version 10 keeps working.
-- The new tables get the grants of the table they replace or extend (done, done_counts), the
-- history's clock USAGE for whoever could write to done, and retire_history EXECUTE for
-- whoever could call truncate_drained.
DO $grants$
DECLARE
    grant_row record;
    target text;
BEGIN
    FOR target IN
        SELECT format('%s.%I', '{schema}', t)
          FROM unnest(ARRAY['done', 'done_cutoffs', 'done_segments']
                      || ARRAY(SELECT 'done_' || i FROM generate_series(0, 15) i)) t
    LOOP
        FOR grant_row IN
            SELECT a.grantee, a.privilege_type
              FROM pg_class c, aclexplode(c.relacl) a
             WHERE c.oid = '{schema}.done_v10'::regclass AND a.grantee <> c.relowner
        LOOP
            EXECUTE format('GRANT %s ON %s TO %s', grant_row.privilege_type, target,
                           CASE grant_row.grantee WHEN 0 THEN 'PUBLIC'
                                ELSE grant_row.grantee::regrole::text END);
        END LOOP;
    END LOOP;
    FOR grant_row IN
        SELECT DISTINCT a.grantee
          FROM pg_class c, aclexplode(c.relacl) a
         WHERE c.oid = '{schema}.done_v10'::regclass AND a.grantee <> c.relowner
           AND a.privilege_type = 'INSERT'
    LOOP
        EXECUTE format('GRANT USAGE ON SEQUENCE %s.done_clock TO %s', '{schema}',
                       CASE grant_row.grantee WHEN 0 THEN 'PUBLIC'
                            ELSE grant_row.grantee::regrole::text END);
    END LOOP;
    FOR grant_row IN
        SELECT a.grantee
          FROM pg_proc p, aclexplode(p.proacl) a
         WHERE p.oid = '{schema}.truncate_drained(text, integer[], integer, integer)'::regprocedure
           AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
    LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s.retire_history(float8, integer, integer) '
                       'TO %s', '{schema}',
                       CASE grant_row.grantee WHEN 0 THEN 'PUBLIC'
                            ELSE grant_row.grantee::regrole::text END);
    END LOOP;
END
$grants$;

DROP TABLE {schema}.done_v10;
