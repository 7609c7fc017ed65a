#!/usr/bin/env bash
# Load benchmark of loom-serve (README.md "Serving over HTTP"): batch-1 MLP predictions over
# HTTP/1.1 keep-alive with wrk (Debian package `wrk`, installed here when missing), beside the
# in-process resident predictor's latency on the same export (build/bench/serve_export).
#   bench/serve.sh [--widths 784,512,256,10] [--duration 10] [--threads 1]
# Two runs per model:
#   saturation: wrk -t1 -c32 (keep-alive): requests/s and latency percentiles
#   half rate:  wrk2 (fixed-rate) is not in Debian, so "half the peak rate" is approximated
#               with fewer connections (-c2, closed loop): its requests/s is printed beside
#               the peak, with the p50/p99 latencies at that load.
# The server, wrk and the clients share the machine: with 2 cores, one is the server's loop
# (HTTP + JSON), one the batching thread (predictor + reply JSON), and wrk competes for both.
set -eu
cd "$(dirname "$0")/.."
WIDTHS="784,512,256,10"
DUR=10
THREADS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --widths) WIDTHS="$2"; shift 2 ;;
    --duration) DUR="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    *) echo "usage: bench/serve.sh [--widths W,W,...] [--duration S] [--threads N]"; exit 2 ;;
  esac
done
if ! command -v wrk >/dev/null; then
  echo "serve bench: installing wrk"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends wrk >/dev/null
fi
make -s -j2 build/loom-serve build/bench/serve_export >/dev/null
TMP=$(mktemp -d /tmp/loom_serve_bench_XXXXXX)
SRV=""
cleanup() { [ -n "$SRV" ] && kill "$SRV" 2>/dev/null; wait 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
build/bench/serve_export --base "$TMP/models" --widths "$WIDTHS" --threads "$THREADS" > "$TMP/inproc.txt"
cat "$TMP/inproc.txt"
build/loom-serve --model_base_path "$TMP/models" --host 127.0.0.1 --port 0 --threads "$THREADS" \
  --max_batch_size 32 > "$TMP/serve.out" 2> "$TMP/serve.err" &
SRV=$!
for _ in $(seq 100); do grep -q listening "$TMP/serve.out" 2>/dev/null && break; sleep 0.05; done
PORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$TMP/serve.out")
URL="http://127.0.0.1:$PORT/v1/models/mlp:predict"
curl -s -f -d @"$TMP/models/request.json" "$URL" > "$TMP/first.json" || { cat "$TMP/serve.err"; exit 1; }
echo "first reply: $(head -c 200 "$TMP/first.json")"
BODY=$(cat "$TMP/models/request.json")
cat > "$TMP/post.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = [==[$BODY]==]
done = function(summary, latency, requests)
  io.write(string.format("rps=%.0f\np50_us=%.0f\np99_us=%.0f\nerrors=%d\n", summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), summary.errors.status + summary.errors.connect + summary.errors.read
    + summary.errors.write + summary.errors.timeout))
end
LUA
run() { wrk -t1 -c"$1" -d"${DUR}s" --latency -s "$TMP/post.lua" "$URL" | grep -E '^(rps|p50_us|p99_us|errors)='; }
echo "--- saturation (wrk -t1 -c32, keep-alive)"
run 32 | tee "$TMP/sat.txt"
echo "--- lighter load (wrk -t1 -c2, keep-alive; approximates half the peak rate)"
run 2 | tee "$TMP/half.txt"
echo "--- summary"
echo "widths=$WIDTHS in-process p50=$(sed -n 's/inproc_p50_us=//p' "$TMP/inproc.txt")us" \
     "p99=$(sed -n 's/inproc_p99_us=//p' "$TMP/inproc.txt")us"
echo "http peak: $(tr '\n' ' ' < "$TMP/sat.txt")"
echo "http light: $(tr '\n' ' ' < "$TMP/half.txt")"
