-- Queue schema, version 8: a truncation no longer keeps the segments it found in use locked
-- until it ends. {schema} is the quoted, validated schema name.
--
-- truncate_drained (v6.sql) locked each drained segment ACCESS EXCLUSIVE and truncated the
-- ones still empty, all in one statement; a segment a claim had written into since the
-- maintenance looked (the lease ring's clock moves a segment every 5 ms at 20k jobs/s) stayed
-- locked to the end of that statement anyway, and every claim or acknowledgement on it
-- waited. Sampling pg_locks during a 10k drain counted ~530 such waits. Each segment is now
-- locked and looked at in a subtransaction that is rolled back when the segment holds a
-- row, which gives its lock back at once. The signature is unchanged (CREATE OR REPLACE), so
-- grants stay and a process of version 6 or 7 calls the new body.

CREATE OR REPLACE FUNCTION {schema}.truncate_drained(ring text, segs integer[], class integer,
                                                     wait_ms integer)
RETURNS integer LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $fn$
DECLARE
    seg integer;
    segment text;
    busy boolean;
    empty text[] := '{}';
BEGIN
    IF ring NOT IN ('ready', 'leases') THEN
        RAISE EXCEPTION 'no ring %', ring;
    END IF;
    IF wait_ms IS NULL OR wait_ms NOT BETWEEN 0 AND 1000 THEN
        RAISE EXCEPTION 'wait_ms % is not from 0 to 1000', wait_ms;
    END IF;
    IF NOT pg_try_advisory_xact_lock(class, hashtext('{schema}.rings')) THEN
        RETURN 0;
    END IF;
    IF wait_ms > 0 THEN
        PERFORM set_config('lock_timeout', wait_ms || 'ms', true);
    END IF;
    FOREACH seg IN ARRAY coalesce((SELECT array_agg(DISTINCT s ORDER BY s) FROM unnest(segs) s), '{}') LOOP
        segment := format('%s.%I', '{schema}', ring || '_' || seg);
        IF NOT EXISTS (SELECT 1 FROM pg_inherits
                        WHERE inhparent = format('%s.%I', '{schema}', ring)::regclass
                          AND inhrelid = to_regclass(segment)) THEN
            RAISE EXCEPTION 'no ring segment %_%', ring, seg;
        END IF;
        -- A subtransaction: raising in it rolls it back and releases the segment's lock.
        BEGIN
            EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE%s', segment,
                           CASE WHEN wait_ms = 0 THEN ' NOWAIT' ELSE '' END);
            EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s)', segment) INTO STRICT busy;
            IF busy THEN
                RAISE EXCEPTION USING ERRCODE = 'LWBSY', MESSAGE = 'segment in use';
            END IF;
            empty := empty || segment;
        EXCEPTION
            WHEN lock_not_available OR SQLSTATE 'LWBSY' THEN
                NULL;
        END;
    END LOOP;
    IF cardinality(empty) > 0 THEN
        EXECUTE 'TRUNCATE ' || array_to_string(empty, ', ');
    END IF;
    RETURN cardinality(empty);
END
$fn$;
