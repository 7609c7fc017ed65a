#!/usr/bin/env bash
# Runs each TF 2.15 Estimator program here under loom (as written: `import
# loom.tf as tf`) and under TF 2.15 unchanged but for that line (`import
# tensorflow as tf`), over seeds, and prints per program and side: the mean
# of each METRIC value, the mean whole-program wall time and the peak RSS.
#   python/examples/tf_programs/compare.sh [seeds...]      (default: 0 1 2)
# LOOM_PY: the Python with loom importable (default: the "py" venv with
# PYTHONPATH=python/ and LOOM_LIBRARY=build/libloom.so); TF_PY: the TF 2.15
# venv's Python (default: scripts/peer_venv.sh tf); PROGRAMS: the programs to run (default: all).
# Each run's line (side, program, seed, wall_s, rss_kb, METRIC values) goes to stderr.
# fashion_mnist_dist.py runs here in local mode (no TF_CONFIG) on both sides; its distributed run
# (1 PS + chief + worker + evaluator) is python/tests/test_tf_programs.py's.
# Sides alternate per run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
seeds=("$@"); [ ${#seeds[@]} -gt 0 ] || seeds=(0 1 2)
LOOM_PY=${LOOM_PY:-$HOME/.cache/loom/venv/py/bin/python}
TF_PY=${TF_PY:-$(bash "$root/scripts/peer_venv.sh" tf)}
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" LOOM_LIBRARY=${LOOM_LIBRARY:-$root/build/libloom.so}
for py in "$LOOM_PY" "$TF_PY"; do  # the pandas programs
  # pinning the venv's numpy keeps pip from upgrading it for a newer pandas (TF 2.15 needs numpy < 2);
  # TF 2.15's pandas_input_fn predates pandas 3 (its string columns' dtype is not one TF converts)
  want=pandas; [ "$py" = "$TF_PY" ] && want="pandas<3"
  "$py" -c "import sys, pandas; sys.exit('$py' == '$TF_PY' and int(pandas.__version__.split('.')[0]) >= 3)" \
    2>/dev/null || "$py" -m pip install -q "$want" "numpy==$("$py" -c 'import numpy; print(numpy.__version__)')" >&2
done
# loom's modules byte-compiled, as pip leaves an installed package (and as TF's are): with
# PYTHONDONTWRITEBYTECODE set, every run would otherwise compile them from source again (~0.2 s)
"$LOOM_PY" -m compileall -q "$root/python/loom" >/dev/null
export DIAMONDS_DIR="$root/tests/fixtures/data" TF_CPP_MIN_LOG_LEVEL=3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$here"/*.py "$tmp"/
run() {  # side program seed -> "wall_s rss_kb METRIC..." on stdout
  local side=$1 prog=$2 seed=$3 py file=$2
  if [ "$side" = tf ]; then py=$TF_PY; file="tf_$prog"; sed '1s/.*/import tensorflow as tf/' "$here/$prog" > "$tmp/$file"
  else py=$LOOM_PY; fi
  (cd "$tmp" && /usr/bin/time -f "TIME %e %M" "$py" "$file" "$seed" > "$tmp/out" 2> "$tmp/err") || {
    echo "FAILED $side $prog seed $seed:" >&2; tail -5 "$tmp/err" >&2; return 1; }
  echo "$(grep '^TIME' "$tmp/err" | tail -1 | cut -d' ' -f2-) $(grep '^METRIC' "$tmp/out" | tail -1 | cut -d' ' -f2-)"
}
printf '%-24s %-5s %-44s %8s %9s\n' program side "metric (mean over seeds)" wall_s peak_MiB
for prog in ${PROGRAMS:-iris_dnn_pandas.py linear_crossed.py wide_deep_tae.py regression_pandas.py \
             iris_linear_numpy.py iris_custom_model_fn.py fashion_mnist_cnn.py keras_iris_estimator.py \
             fashion_mnist_dist.py tfrecord_csv_linear.py}; do
  declare -A lines=()
  i=0
  for seed in "${seeds[@]}"; do
    if [ $((i % 2)) -eq 0 ]; then order="loom tf"; else order="tf loom"; fi
    for side in $order; do
      line=$(run "$side" "$prog" "$seed")
      echo "$side $prog seed=$seed $line" >&2  # every run: wall_s rss_kb METRIC...
      lines[$side]+="$line"$'\n'
    done
    i=$((i + 1))
  done
  for side in loom tf; do
    printf '%s' "${lines[$side]}" | python3 -c '
import sys, re, statistics as s
rows = [l.split() for l in sys.stdin if l.strip()]
wall = s.mean(float(r[0]) for r in rows); rss = max(int(r[1]) for r in rows) / 1024
keys = [kv.split("=")[0] for kv in rows[0][2:]]
met = " ".join("%s=%.4g" % (k, s.mean(float(dict(kv.split("=") for kv in r[2:])[k]) for r in rows)) for k in keys
               if k in ("accuracy", "auc", "rmse", "linear_accuracy", "dnn_accuracy"))
print("%-24s %-5s %-44s %8.2f %9.0f" % (sys.argv[1], sys.argv[2], met, wall, rss))' "$prog" "$side"
  done
  unset lines
done
uptime
