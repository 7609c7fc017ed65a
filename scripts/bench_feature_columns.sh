#!/usr/bin/env bash
# Feature columns, CSV to input layer, one thread: loom (build/bench/feature_columns)
# against TF 2.15 (bench/peers/tf_feature_columns.py, the faster of its graph
# and Keras paths) on the same synthetic census CSV; prints key=value lines and
# the ratio loom/TF of examples/s.
#   ROWS (100000), BATCH (256), EPOCHS (3), BUILD (build), CSV (generated under /tmp)
set -eu
BUILD=${BUILD:-build}
ROWS=${ROWS:-100000}
BATCH=${BATCH:-256}
EPOCHS=${EPOCHS:-3}
CSV=${CSV:-/tmp/loom_census_${ROWS}.csv}
PY=$(scripts/peer_venv.sh tf 2>/dev/null || echo /root/.cache/loom/venv/tf/bin/python)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
[ -f "$CSV" ] || python3 scripts/gen_census_csv.py "$CSV" "$ROWS"
[ -x "$BUILD/bench/feature_columns" ] || make -s "$BUILD/bench/feature_columns"
get() { printf '%s\n' "$1" | sed -n "s/^$2=//p" | head -1; }
loom=$("$BUILD/bench/feature_columns" --csv "$CSV" --batch "$BATCH" --epochs "$EPOCHS" --threads 1)
tfg=$("$PY" bench/peers/tf_feature_columns.py --csv "$CSV" --batch "$BATCH" --epochs "$EPOCHS" --mode graph 2>/dev/null)
tfk=$("$PY" bench/peers/tf_feature_columns.py --csv "$CSV" --batch "$BATCH" --epochs "$EPOCHS" --mode keras 2>/dev/null)
echo "rows=$ROWS batch=$BATCH epochs=$EPOCHS"
echo "loom_examples_per_sec=$(get "$loom" examples_per_sec) loom_width=$(get "$loom" width)"
echo "tf_graph_examples_per_sec=$(get "$tfg" examples_per_sec) tf_width=$(get "$tfg" width)"
echo "tf_keras_examples_per_sec=$(get "$tfk" examples_per_sec)"
python3 - "$(get "$loom" examples_per_sec)" "$(get "$tfg" examples_per_sec)" "$(get "$tfk" examples_per_sec)" <<'PY'
import sys
l, g, k = (float(x) if x else float("nan") for x in sys.argv[1:])
best = max(g, k)
print("tf_best_examples_per_sec=%.1f" % best)
print("ratio_loom_vs_tf=%.2f" % (l / best))
PY
