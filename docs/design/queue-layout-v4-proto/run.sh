#!/bin/bash
# usage: run.sh NAME SCHEMA DURATION DONE_COUNT_SQL [PRODUCER=1]
# runs producer (1 client), consumers (8 clients), maintenance (1 client) for DURATION s,
# samples pg_stat_user_tables of SCHEMA every second.
NAME=$1; SCHEMA=$2; DUR=$3; DONESQL=$4; PROD=${5:-1}
DB="-h 127.0.0.1 -U postgres -d layout_proto"
OUT=/work/proto/out/$NAME; mkdir -p $OUT; rm -f $OUT/samples.csv
P="psql $DB -Atq"
$P -c "select pg_stat_force_next_flush()" >/dev/null 2>&1
D0=$($P -c "$DONESQL"); T0=$(date +%s.%N)
( for i in $(seq 1 $((DUR+8))); do
    $P -F, -c "select extract(epoch from clock_timestamp())::numeric(14,1), relname, n_live_tup, n_dead_tup, coalesce(autovacuum_count,0)+coalesce(vacuum_count,0) from pg_stat_user_tables where schemaname='$SCHEMA'" >> $OUT/samples.csv
    sleep 1; done ) &
SAMPLER=$!
[ "$PROD" = 1 ] && pgbench $DB -n -M prepared -c 1 -T $DUR -D target=${TARGET:-4000} -f /work/proto/${NAME%%_*}_producer.sql > $OUT/producer.log 2>&1 &
PB=$!
pgbench $DB -n -M prepared -c 1 -T $DUR -D every=${EVERY:-1000} -f /work/proto/${NAME%%_*}_maint.sql > $OUT/maint.log 2>&1 &
MB=$!
pgbench $DB -n -M prepared -c 8 -j 2 -T $DUR -D ids='{}' -D atts='{}' -D pslots='{}' -D bank=0 -f /work/proto/${NAME%%_*}_consumer.sql > $OUT/consumer.log 2>&1
T1=$(date +%s.%N)
wait $PB $MB 2>/dev/null
D1=$($P -c "$DONESQL")
sleep 6; kill $SAMPLER 2>/dev/null; wait $SAMPLER 2>/dev/null
python3 - "$OUT" "$D0" "$D1" "$T0" "$T1" <<'PY'
import sys, csv, collections
out, d0, d1, t0, t1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
rows = list(csv.reader(open(out + "/samples.csv")))
peak = collections.defaultdict(int); last = {}; live = collections.defaultdict(int); av = {}
tot = collections.defaultdict(int)
for ts, rel, l, d, v in rows:
    peak[rel] = max(peak[rel], int(d)); last[rel] = int(d); live[rel] = max(live[rel], int(l)); av[rel] = int(v)
    tot[ts] += int(d)
jobs = (d1 - d0) / (t1 - t0)
print(f"jobs/s={jobs:.0f} done={d1-d0} secs={t1-t0:.1f}")
print(f"sum-over-tables dead peak={max(tot.values())} end={tot[max(tot)]}")
for rel in sorted(peak, key=lambda r: -peak[r])[:8]:
    print(f"  {rel:22s} dead peak={peak[rel]:7d} end={last[rel]:7d} live max={live[rel]:7d} vacuums={av[rel]}")
PY
