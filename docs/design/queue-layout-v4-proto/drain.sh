#!/bin/bash
# usage: drain.sh LAYOUT(cur|slot) N  -> preloads N jobs, drains them with 8 consumers, prints jobs/s
L=$1; N=$2; DB="-h 127.0.0.1 -U postgres -d layout_proto"; P="psql $DB -Atq"
if [ $L = cur ]; then
  $P -c "truncate cur.jobs"
  $P -c "INSERT INTO cur.jobs (queue, payload, priority, run_at, max_attempts) SELECT 'q', jsonb_build_object('n', g, 'pad', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'), 0, now(), 5 FROM generate_series(1, $N) g"
  LEFT="select count(*) from cur.jobs where state <> 'done'"
else
  $P -f /work/proto/${L}_schema.sql >/dev/null 2>&1
  $P -c "INSERT INTO $L.ready (id, queue, payload, priority, run_at, max_attempts) SELECT nextval('$L.job_id'), 'q', jsonb_build_object('n', g, 'pad', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'), 0, now(), 5 FROM generate_series(1, $N) g"
  LEFT="select (select count(*) from $L.ready) + (select count(*) from $L.slots where id is not null)"
fi
sleep 2
OUT=/work/proto/out/drain_${L}_$N; mkdir -p $OUT
T0=$(date +%s.%N)
pgbench $DB -n -M prepared -c 8 -j 2 -T 300 -D ids='{}' -D atts='{}' -D pslots='{}' -D bank=0 -f /work/proto/${L}_consumer.sql > $OUT/consumer.log 2>&1 &
PB=$!
[ $L != cur ] && { pgbench $DB -n -M prepared -c 1 -T 300 -f /work/proto/${L}_maint.sql > $OUT/maint.log 2>&1 & MB=$!; }
MAXD=0
while true; do
  sleep 0.5
  R=$($P -c "$LEFT"); D=$($P -c "select coalesce(max(n_dead_tup),0) from pg_stat_user_tables where schemaname='$L'")
  [ "$D" -gt "$MAXD" ] && MAXD=$D
  [ "$R" -le 100 ] && break
done
T1=$(date +%s.%N)
kill $PB $MB 2>/dev/null; wait 2>/dev/null
python3 -c "print(f'drain $L N=$N: {($N-100)/($T1-$T0):.0f} jobs/s over {$T1-$T0:.1f} s, max per-table n_dead_tup seen {$MAXD}')"
