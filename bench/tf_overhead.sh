#!/usr/bin/env bash
# Per-step overhead of training from loom.tf (Python) against the same
# canned model from C: bench/canned.c's iris_dnn (build/bench/canned) and
# bench/tf_overhead.py (the same recipe as a TF 2.15 program on loom.tf).
# Each side trains N1 and N2 steps from a fresh model_dir, R rounds, sides and
# lengths alternating; the per-step time of a side is the difference of its
# train() times over N2 - N1 (setup, graph building and checkpoints at the
# start and end cancel), the minimum over rounds (the least disturbed run
# on a shared machine). Prints key=value lines:
#   c_step_us, py_step_us, ratio (= py / c; the target is <= 1.05)
#   bench/tf_overhead.sh [R] [N1] [N2]      (default 5 1000 5000)
# PY: a Python with numpy (default: scripts/peer_venv.sh py); BUILD (build).
set -euo pipefail
cd "$(dirname "$0")/.."
R=${1:-5}; N1=${2:-1000}; N2=${3:-5000}
BUILD=${BUILD:-build}
PY=${PY:-$(bash scripts/peer_venv.sh py)}
make -s -j2 "$BUILD/bench/canned" >/dev/null
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" LOOM_LIBRARY=${LOOM_LIBRARY:-$PWD/$BUILD/libloom.so}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() {  # side steps -> train_sec
  local md="$tmp/m$RANDOM$RANDOM"
  if [ "$1" = c ]; then "$BUILD/bench/canned" --model iris_dnn --threads 0 --steps "$2" --model_dir "$md"
  else "$PY" bench/tf_overhead.py --steps "$2"; fi | sed -n 's/^train_sec=//p'
}
best_c=""; best_py=""
for ((r = 0; r < R; r++)); do
  for side in c py; do
    a=$(run $side "$N1"); b=$(run $side "$N2")
    us=$(python3 -c "print('%.2f' % (($b - $a) * 1e6 / ($N2 - $N1)))")
    echo "round=$r side=$side train_sec_n1=$a train_sec_n2=$b step_us=$us"
    if [ $side = c ]; then best_c=$(python3 -c "print(min(x for x in [$us, ${best_c:-1e99}]))")
    else best_py=$(python3 -c "print(min(x for x in [$us, ${best_py:-1e99}]))"); fi
  done
done
echo "n1=$N1"; echo "n2=$N2"; echo "rounds=$R"
echo "c_step_us=$best_c"; echo "py_step_us=$best_py"
python3 -c "print('ratio=%.3f' % ($best_py / $best_c))"
echo "load=$(cut -d' ' -f1-3 /proc/loadavg)"
