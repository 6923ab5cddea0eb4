#!/bin/bash
# usage: backlog.sh LAYOUT DEPTH DUR : preload DEPTH jobs, then run run.sh with the producer holding DEPTH
L=$1; N=$2; DUR=$3; P="psql -h 127.0.0.1 -U postgres -d layout_proto -Atq"
if [ $L = cur ]; then
  $P -c "truncate cur.jobs"
  $P -c "INSERT INTO cur.jobs (queue, payload, priority, run_at, max_attempts) SELECT 'q', jsonb_build_object('n', g, 'pad', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'), 0, now(), 5 FROM generate_series(1, $N) g"
  DONE="select count(*) from cur.jobs where state='done'"
else
  $P -f /work/proto/${L}_schema.sql >/dev/null 2>&1
  $P -c "INSERT INTO $L.ready (id, queue, payload, priority, run_at, max_attempts) SELECT nextval('$L.job_id'), 'q', jsonb_build_object('n', g, 'pad', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'), 0, now(), 5 FROM generate_series(1, $N) g"
  DONE="select coalesce(sum(n_tup_ins),0) from pg_stat_user_tables where schemaname='$L' and relname like 'done\_%'"
fi
$P -c "analyze" 
TARGET=$N /work/proto/run.sh ${L}_depth$N $L $DUR "$DONE"
