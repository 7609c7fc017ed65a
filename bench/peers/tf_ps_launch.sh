#!/usr/bin/env bash
# bench/peers/tf_ps_launch.sh P N STEPS OUTDIR [MODEL]: (MODEL: dnn, sparse, wide_deep; tf_ps_job.py --model) TF 2.15's PS job (tf_ps_job.py) with P PS
# tasks and N trainers (chief + N-1 workers) on loopback, free ports picked first; prints
# the chief's key=value line. PS tasks never exit in TF: they are killed after the chief.
set -u
P=$1; N=$2; STEPS=$3; OUT=$4; MODEL=${5:-dnn}
PY=${TF_PY:-$HOME/.cache/loom/venv/tf/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
PORTS=($("$PY" - "$((P + N))" <<'PYEOF'
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks: s.close()
PYEOF
))
addr() { printf '"127.0.0.1:%s"' "${PORTS[$1]}"; }
PSL=""; for ((i = 0; i < P; i++)); do PSL+="${PSL:+, }$(addr $i)"; done
WL=""; for ((i = 1; i < N; i++)); do WL+="${WL:+, }$(addr $((P + i)))"; done
CL="\"chief\": [$(addr $P)], \"ps\": [$PSL]"; [ -n "$WL" ] && CL+=", \"worker\": [$WL]"
pids=()
run() { TF_CONFIG="{\"cluster\": {$CL}, \"task\": {\"type\": \"$1\", \"index\": $2}}" \
  "$PY" "$HERE/tf_ps_job.py" --model_dir "$OUT/model" --steps "$STEPS" --model "$MODEL" >"$OUT/$1-$2.log" 2>&1 & pids+=($!); }
for ((i = 0; i < P; i++)); do run ps $i; done
for ((i = 1; i < N; i++)); do run worker $((i - 1)); done
TF_CONFIG="{\"cluster\": {$CL}, \"task\": {\"type\": \"chief\", \"index\": 0}}" timeout 600 \
  "$PY" "$HERE/tf_ps_job.py" --model_dir "$OUT/model" --steps "$STEPS" --model "$MODEL" >"$OUT/chief-0.log" 2>&1
rc=$?
sleep 2
for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
wait 2>/dev/null
grep -h "global_steps_per_sec" "$OUT/chief-0.log" | tail -1
exit $rc
