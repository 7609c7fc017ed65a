#!/usr/bin/env bash
# bench/contention.sh - training and prediction on a machine shared with
# busy processes. For k = 0, 1, 2, 4 CPU-bound background processes
# (`while 1: pass` loops) it runs loom's MLP step (build/bench/mlp_train,
# 784-512-256-10, Adam, batch 128) and PyTorch's (bench/peers/torch_mlp.py)
# with --threads = the CPUs this shell may use, alternating the order each
# round, and prints key=value lines:
#   loom_ms_K torch_ms_K           median step (the median of the rounds' medians)
#   loom_slowdown_K torch_slowdown_K   step at K / step at k=0 of the same side
#   fair_share_K                   (runnable threads = threads + K) / CPUs, at least 1
#   loom_vs_fair_K                 loom_slowdown_K / fair_share_K (target <= 1.25)
#   loom_ok_K                      1 when loom_slowdown_K <= torch_slowdown_K and loom_vs_fair_K <= 1.25
# then the resident predictor's batch-1 p50/p99 (bench/predict_latency) beside
# TensorFlow's SavedModel signature call (bench/peers/tf_predict_latency.py)
# at k = 0 and k = 2: predict_{loom,tf}_{p50,p99}_us_K.
# load_K / procs_running_K: the 1-minute load average and running tasks just
# before the K round's busy processes start (other work on the machine).
#   Environment: BUILD (build), THREADS (CPUs of this shell), KS ("0 1 2 4"),
#   STEPS (300), ROUNDS (3), PREDICT_KS ("0 2"), OLD (path of another
#   mlp_train, e.g. an older build: measured as a third side, old_*).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CPUS=$(nproc)
THREADS=${THREADS:-$CPUS}
KS=${KS:-"0 1 2 4"}
STEPS=${STEPS:-300}
ROUNDS=${ROUNDS:-3}
PREDICT_KS=${PREDICT_KS:-"0 2"}
OLD=${OLD:-}
for b in mlp_train predict_latency; do
  [ -x "$BUILD/bench/$b" ] || { echo "contention.sh: $BUILD/bench/$b missing (make bench)" >&2; exit 2; }
done
if grep -q avx512f /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SKYLAKEX}; fi
TORCH_PY=$(scripts/peer_venv.sh torch 2>/dev/null) || TORCH_PY=python3
TF_PY=$(scripts/peer_venv.sh tf 2>/dev/null) || TF_PY=python3

BUSY=()
stop_busy() {
  local p
  for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${BUSY[@]}"; do wait "$p" 2>/dev/null; done
  BUSY=()
}
trap stop_busy EXIT
start_busy() {
  local i
  for ((i = 0; i < $1; i++)); do
    python3 -c 'while 1: pass' &
    BUSY+=($!)
  done
  sleep 0.5
}
get() { printf '%s\n' "$1" | sed -n "s/^$2=//p" | head -1; }
median() { python3 -c 'import sys, statistics; v=[float(x) for x in sys.argv[1:] if x]; print("%.4f" % statistics.median(v) if v else "nan")' "$@"; }
div() { python3 -c 'import sys
try: print("%.3f" % (float(sys.argv[1]) / float(sys.argv[2])))
except Exception: print("nan")' "$1" "$2"; }
step_ms() { # impl -> median step in ms (empty when it could not run)
  local out
  case $1 in
    loom) out=$("$BUILD/bench/mlp_train" --opt adam --steps "$STEPS" --threads "$THREADS" 2>/dev/null) ;;
    old) out=$("$OLD" --opt adam --steps "$STEPS" --threads "$THREADS" 2>/dev/null) ;;
    torch) out=$("$TORCH_PY" bench/peers/torch_mlp.py --opt adam --steps "$STEPS" --threads "$THREADS" 2>/dev/null) ;;
  esac
  local us; us=$(get "$out" step_us)
  [ -n "$us" ] && python3 -c "print('%.4f' % ($us / 1000.0))"
}

IMPLS="loom torch"
[ -n "$OLD" ] && IMPLS="loom old torch"
echo "cpus=$CPUS"
echo "threads=$THREADS"
echo "steps=$STEPS"
echo "rounds=$ROUNDS"
echo "openblas_coretype=${OPENBLAS_CORETYPE:-auto}"
echo "torch_python=$TORCH_PY"
declare -A MS
for k in $KS; do
  echo "load_$k=$(cut -d' ' -f1 /proc/loadavg)"
  echo "procs_running_$k=$(awk '/^procs_running/ {print $2 - 1}' /proc/stat)"
  start_busy "$k"
  declare -A V=()
  for ((r = 0; r < ROUNDS; r++)); do
    order=$IMPLS
    (( r % 2 )) && order=$(printf '%s\n' $IMPLS | tac | tr '\n' ' ')
    for impl in $order; do V[$impl]+=" $(step_ms "$impl")"; done
  done
  stop_busy
  for impl in $IMPLS; do
    # shellcheck disable=SC2086
    MS[$impl,$k]=$(median ${V[$impl]})
    echo "${impl}_ms_$k=${MS[$impl,$k]}"
  done
  unset V
done
first=${KS%% *}
for k in $KS; do
  fair=$(python3 -c "print('%.3f' % max(1.0, ($THREADS + $k) / $CPUS))")
  echo "fair_share_$k=$fair"
  for impl in $IMPLS; do echo "${impl}_slowdown_$k=$(div "${MS[$impl,$k]}" "${MS[$impl,$first]}")"; done
  ls=$(div "${MS[loom,$k]}" "${MS[loom,$first]}")
  ts=$(div "${MS[torch,$k]}" "${MS[torch,$first]}")
  lf=$(div "$ls" "$fair")
  echo "loom_vs_fair_$k=$lf"
  echo "loom_ok_$k=$(python3 -c "
import sys
l, t, f = (float(x) for x in sys.argv[1:])
print(int(l <= t and f <= 1.25) if t == t else int(f <= 1.25))" "$ls" "$ts" "$lf" 2>/dev/null || echo nan)"
done
for k in $PREDICT_KS; do
  echo "load_predict_$k=$(cut -d' ' -f1 /proc/loadavg)"
  start_busy "$k"
  lp=$("$BUILD/bench/predict_latency" --threads "$THREADS" --runs 3000 2>/dev/null)
  tp=$("$TF_PY" bench/peers/tf_predict_latency.py --threads "$THREADS" --runs 3000 2>/dev/null)
  lp2=$("$BUILD/bench/predict_latency" --threads "$THREADS" --runs 3000 2>/dev/null)
  stop_busy
  for q in p50 p99; do
    echo "predict_loom_${q}_us_$k=$(median "$(get "$lp" batch1_${q}_us)" "$(get "$lp2" batch1_${q}_us)")"
    v=$(get "$tp" batch1_${q}_us)
    echo "predict_tf_${q}_us_$k=${v:-skipped}"
  done
done
echo "load_end=$(cut -d' ' -f1 /proc/loadavg)"
