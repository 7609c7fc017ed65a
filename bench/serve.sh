#!/usr/bin/env bash
# Load benchmark of loom-serve (docs/serving.md): batch-1 MLP predictions over
# HTTP/1.1 keep-alive, beside the in-process resident predictor's latency on the same export
# (build/bench/serve_export).
#   bench/serve.sh [--widths 784,512,256,10] [--duration 10] [--threads 1] [--rt | --nice] [--batch_thread 0|1]
# Two measurements per run, server and load in the same run:
#   peak:      wrk -t1 -c32 (Debian's wrk, closed loop, keep-alive): requests/s.
#   half rate: build/bench/loadgen at a constant rate of half that peak and at 10,000/s
#              (wrk2's method, which Debian's wrk lacks: requests are scheduled at fixed times
#              and each latency runs from its scheduled time, so queueing behind a slow reply
#              counts): p50/p99 latency.
# --rt runs the server and the load under SCHED_FIFO (chrt -f 20) so that other work on a
# shared machine does not preempt them (what an idle 2-core machine would give); the output
# says which (sched=fifo|other) with the load average before the run. Under SCHED_FIFO the
# kernel's RT throttling (sched_rt_runtime_us, 95%) pauses both for ~50 ms a second once they
# keep the CPUs busy, which shows in the p99 of the saturating runs. --nice runs them at nice -20
# instead (sched=nice-20).
set -eu
cd "$(dirname "$0")/.."
WIDTHS="784,512,256,10"
DUR=10
THREADS=1
RT=0
BT=0
while [ $# -gt 0 ]; do
  case "$1" in
    --widths) WIDTHS="$2"; shift 2 ;;
    --duration) DUR="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --rt) RT=1; shift ;;
    --nice) RT=2; shift ;;
    --batch_thread) BT="$2"; shift 2 ;;
    *) echo "usage: bench/serve.sh [--widths W,W,...] [--duration S] [--threads N] [--rt | --nice] [--batch_thread 0|1]"; exit 2 ;;
  esac
done
if ! command -v wrk >/dev/null; then
  echo "serve bench: installing wrk"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends wrk >/dev/null
fi
make -s -j2 build/loom-serve build/bench/serve_export build/bench/loadgen >/dev/null
PRIO=""
SCHED=other
if [ "$RT" = 1 ]; then PRIO="chrt -f 20"; SCHED=fifo; fi
if [ "$RT" = 2 ]; then PRIO="nice -n -20"; SCHED=nice-20; fi
TMP=$(mktemp -d /tmp/loom_serve_bench_XXXXXX)
SRV=""
cleanup() { [ -n "$SRV" ] && kill "$SRV" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
echo "widths=$WIDTHS sched=$SCHED cores=$(nproc) loadavg_before=$(cut -d' ' -f1 /proc/loadavg)"
$PRIO build/bench/serve_export --base "$TMP/models" --widths "$WIDTHS" --threads "$THREADS" > "$TMP/inproc.txt"
cat "$TMP/inproc.txt"
$PRIO build/loom-serve --model_base_path "$TMP/models" --host 127.0.0.1 --port 0 --threads "$THREADS" \
  --max_batch_size 32 --batch_thread "$BT" > "$TMP/serve.out" 2> "$TMP/serve.err" &
SRV=$!
for _ in $(seq 100); do grep -q listening "$TMP/serve.out" 2>/dev/null && break; sleep 0.05; done
PORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$TMP/serve.out")
URL="http://127.0.0.1:$PORT/v1/models/mlp:predict"
curl -s -f -d @"$TMP/models/request.json" "$URL" > "$TMP/first.json" || { cat "$TMP/serve.err"; exit 1; }
echo "first_reply=$(head -c 120 "$TMP/first.json")"
BODY=$(cat "$TMP/models/request.json")
cat > "$TMP/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [==[$BODY]==]
done = function(summary, latency, requests)
  io.write(string.format("peak_rps=%.0f\npeak_p50_us=%.0f\npeak_p99_us=%.0f\npeak_errors=%d\n",
    summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99),
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
LUA
$PRIO wrk -t1 -c32 -d"${DUR}s" --latency -s "$TMP/post.lua" "$URL" | grep -E '^peak_' | tee "$TMP/sat.txt"
PEAK=$(sed -n 's/peak_rps=//p' "$TMP/sat.txt")
HALF=$((PEAK / 2))
constant() { # rate prefix
  $PRIO build/bench/loadgen --port "$PORT" --path /v1/models/mlp:predict --body "$TMP/models/request.json" \
    --rate "$1" --conns 16 --duration "$DUR" --warmup 1 | sed -n -e "s/^\(achieved_rate\|p50_us\|p90_us\|p99_us\|p999_us\|errors\|late\)=/$2_\1=/p"
}
echo "half_rate=$HALF"
constant "$HALF" half
sleep 1
cpu_ns() { cat /proc/"$SRV"/task/*/schedstat | awk '{ t += $1 } END { printf "%.0f", t }'; } # time on CPU, all threads
echo "fixed_rate=10000"
T0=$(cpu_ns)
constant 10000 r10k | tee "$TMP/r10k.txt"
T1=$(cpu_ns)
# the server's CPU time (user + system, all threads) per request at 10k/s, warmup included
N=$(awk -v d="$DUR" 'BEGIN { print int(10000 * (d + 1)) }')
echo "r10k_server_cpu_us_per_request=$(awk -v t=$((T1 - T0)) -v n="$N" 'BEGIN { printf "%.1f", t / 1e3 / n }')"
echo "loadavg_after=$(cut -d' ' -f1 /proc/loadavg)"
kill -TERM "$SRV"
wait "$SRV" 2>/dev/null || true
SRV=""
echo "server_$(tail -n 1 "$TMP/serve.err" | sed 's/^loom-serve: //')"
