#!/usr/bin/env bash
# Per-step overhead of training from loom.tf (Python) against the same
# canned model from C: bench/canned.c's iris_dnn (build/bench/canned --rate_hook 0: no hook) and
# bench/tf_overhead.py (the same recipe as a TF 2.15 program on loom.tf).
# Each side trains N1 and N2 steps from a fresh model_dir, R rounds, sides and
# lengths alternating; the per-step time of a side is the difference of its
# train() times over N2 - N1 (setup, graph building and checkpoints at the
# start and end cancel); one session thread each. Prints key=value lines:
#   c_step_us, py_step_us, ratio (= py / c; the target is <= 1.05): the minimum
#   over rounds (the least disturbed run on a shared machine);
#   c_step_us_median, py_step_us_median, ratio_median; the same over each process's
#   CPU time during train() (cpu_c_step_us, ...: steadier on a loaded machine)
#   bench/tf_overhead.sh [R] [N1] [N2]      (default 7 1000 50000)
# PY: a Python with numpy (default: scripts/peer_venv.sh py); BUILD (build).
set -euo pipefail
cd "$(dirname "$0")/.."
R=${1:-7}; N1=${2:-1000}; N2=${3:-50000}
BUILD=${BUILD:-build}
PY=${PY:-$(bash scripts/peer_venv.sh py)}
make -s -j2 "$BUILD/bench/canned" >/dev/null
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" LOOM_LIBRARY=${LOOM_LIBRARY:-$PWD/$BUILD/libloom.so}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
run() {  # side steps -> "train_sec train_cpu_sec"
  local md="$tmp/m$RANDOM$RANDOM"
  if [ "$1" = c ]; then "$BUILD/bench/canned" --model iris_dnn --threads 1 --rate_hook 0 --steps "$2" --model_dir "$md"
  else LOOM_NUM_THREADS=1 "$PY" bench/tf_overhead.py --steps "$2"; fi | sed -n 's/^train_\(cpu_\)\{0,1\}sec=//p' | paste -sd' '
}
all_c=""; all_py=""; cpu_c=""; cpu_py=""
for ((r = 0; r < R; r++)); do
  for side in c py; do
    read -r a ac <<<"$(run $side "$N1")"; read -r b bc <<<"$(run $side "$N2")"
    us=$(python3 -c "print('%.2f' % (($b - $a) * 1e6 / ($N2 - $N1)))")
    cus=$(python3 -c "print('%.2f' % (($bc - $ac) * 1e6 / ($N2 - $N1)))")
    echo "round=$r side=$side train_sec_n1=$a train_sec_n2=$b step_us=$us cpu_step_us=$cus"
    if [ $side = c ]; then all_c+="$us,"; cpu_c+="$cus,"; else all_py+="$us,"; cpu_py+="$cus,"; fi
  done
done
echo "n1=$N1"; echo "n2=$N2"; echo "rounds=$R"
python3 -c "
import statistics as s
for tag, c, p in (('', [$all_c], [$all_py]), ('cpu_', [$cpu_c], [$cpu_py])):
    print('%sc_step_us=%.2f\n%spy_step_us=%.2f\n%sratio=%.3f' % (tag, min(c), tag, min(p), tag, min(p) / min(c)))
    print('%sc_step_us_median=%.2f\n%spy_step_us_median=%.2f\n%sratio_median=%.3f' % (
        tag, s.median(c), tag, s.median(p), tag, s.median(p) / s.median(c)))"
echo "load=$(cut -d' ' -f1-3 /proc/loadavg)"
