#!/usr/bin/env bash
# bench/gloo_overlap.sh - the collective strategy over Gloo (a TF_CONFIG launch by scripts/launch_local,
# chief + 1 worker) with overlapped all-reduces (the Gloo plugin's non-blocking all-reduce) against
# blocking ones (LOOM_COLLECTIVE_OVERLAP=0), alternated in rounds on the same machine: the issue's
# Fashion-MNIST MLP (784-512-256-10, batch 128 per worker, 1 thread per process). One key=value line
# per job (the chief's global steps/s and its strategy summary), then the medians per mode.
#
#   bench/gloo_overlap.sh [ROUNDS=3] [STEPS=300]
# Env: DATA (Fashion-MNIST idx folder, default /usr/share/datasets/fashion-mnist), BIN (dist_job),
#      EXTRA_MODES: more modes, space-separated name=VAR=value[,VAR=value...], e.g.
#      "small=LOOM_COLLECTIVE_OVERLAP=0,LOOM_COLLECTIVE_BUCKET_BYTES=524288 v1=LOOM_GLOO_PLUGIN=/old/libloom_gloo.so".
set -u
ROUNDS=${1:-3}
STEPS=${2:-300}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
BIN=${BIN:-build/examples/dist_job}
TMP=$(mktemp -d /tmp/gloo_overlap_XXXXXX)
trap 'rm -rf "$TMP"' EXIT
MODES=("overlap=LOOM_COLLECTIVE_OVERLAP=1" "blocking=LOOM_COLLECTIVE_OVERLAP=0")
[ -n "${EXTRA_MODES:-}" ] && for m in $EXTRA_MODES; do MODES+=("$m"); done
echo "gloo_overlap: cores=$(nproc) load=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,) rounds=$ROUNDS steps=$STEPS"
for ((r = 1; r <= ROUNDS; r++)); do
  for m in "${MODES[@]}"; do
    name=${m%%=*}
    env=${m#*=}
    d=$TMP/$name-$r
    env ${env//,/ } LOOM_COLLECTIVE_TIMEOUT=60 timeout 600 scripts/launch_local -p 0 -w 1 -e 0 -d "$d" -- "$BIN" \
      --strategy collective --data "$DATA" --hidden 512,256 --batch 128 --max_steps "$STEPS" --save_steps 100000 \
      --threads 1 --warmup 20 > "$d.out" 2>&1
    rc=$?
    sps=$(grep -ho 'global_steps_per_sec=[0-9.]*' "$d/logs/chief-0.log" | tail -1 | cut -d= -f2)
    line=$(grep -h '^collective: rank=0 ' "$d/logs/chief-0.log" | tail -1)
    kv() { echo "$line" | grep -o " $1=[^ ]*" | cut -d= -f2; }
    echo "mode=$name round=$r rc=$rc global_steps_per_sec=${sps:-nan} run_ms=$(kv run_ms) comm_ms=$(kv comm_ms)" \
      "allreduce_wall_ms=$(kv allreduce_wall_ms) overlap_fraction=$(kv overlap_fraction) buckets=$(kv buckets)" \
      "allreduce_async=$(kv allreduce_async) checksum=$(kv variables_checksum)"
  done
done | tee "$TMP/all"
for m in "${MODES[@]}"; do
  name=${m%%=*}
  med=$(grep "^mode=$name " "$TMP/all" | grep -o 'global_steps_per_sec=[0-9.]*' | cut -d= -f2 | sort -g |
    awk '{a[NR]=$1} END {if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2); else print "nan"}')
  echo "median mode=$name global_steps_per_sec=$med"
done
