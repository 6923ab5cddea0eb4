-- The lease segments of jobs {ids} (attempts {attempts}), in the order named, from the
-- hints {segs}: a hint of a segment of the ring stands; for a job without one (NULL, or a
-- segment outside the ring) its lease is looked up through the ring's parent, NULL if gone.
-- Run by v9.sql's functions before they lock anything, so that the acknowledgement locks every
-- lease segment by segment in ascending order, the (segment, id) order of a heartbeat
-- (locked_leases.sql). {last} is the ring's last segment.
ARRAY(
    SELECT CASE WHEN u.seg BETWEEN 0 AND {last} THEN u.seg
                ELSE (SELECT l.seg
                        FROM {schema}.leases l
                       WHERE l.id = u.id AND l.attempt = u.attempt)
           END
      FROM unnest({ids}::bigint[], {attempts}::int[], {segs}::smallint[])
           WITH ORDINALITY AS u(id, attempt, seg, n)
     ORDER BY u.n
)
