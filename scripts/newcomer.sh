#!/usr/bin/env bash
# `make newcomer`: what a newcomer does with loom, from a clean temporary
# prefix and a fresh virtualenv, nothing taken from the source tree at run time:
#   1. make install PREFIX=<tmp>;
#   2. a C program built with `pkg-config --cflags --libs loom` from there:
#      a canned DNNClassifier trained on a small in-memory dataset (two classes
#      split by the line x0 + x1 = 0), evaluated, exported; run without
#      LD_LIBRARY_PATH;
#   3. the installed `loom` command line on the same problem as a CSV file and a
#      job file: train, evaluate, export;
#   4. the Python package: `make wheel`, installed into a fresh venv, trained
#      from a directory outside the tree with LOOM_LIBRARY unset
#      (scripts/python_smoke.py); skipped with a message when PyPI is unreachable;
#   5. the installed `loom-serve` on both exports (port 0), a prediction for
#      each with curl.
# Exit status 0 when every step passed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
MAKE=${MAKE:-make}
BUILD=${BUILD:-build}
tmp=$(mktemp -d /tmp/loom_newcomer_XXXXXX)
serve_pid=
cleanup() { [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
prefix=$tmp/prefix
fail() { echo "newcomer: FAIL: $*" >&2; exit 1; }
step() { echo "newcomer: $*"; }
unset LD_LIBRARY_PATH LOOM_LIBRARY
export PATH=$prefix/bin:$PATH PKG_CONFIG_PATH=$prefix/lib/pkgconfig

# 1. install
$MAKE --no-print-directory -s install PREFIX="$prefix" BUILD="$BUILD" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "make install PREFIX=$prefix"; }
step "installed into $prefix"
mkdir -p "$tmp/work" "$tmp/models"
cd "$tmp/work" || exit 1

# 2. a canned estimator in C
cat >dnn.c <<'C'
#include <stdio.h>
#include <string.h>
#include "loom/loom.h"

enum { N = 200 };
static float xs[N][2];
static int32_t ys[N];

static loom_dataset *input_fn(loom_mode mode, const loom_params *p, void *user, loom_status *st) {
  (void)p, (void)user;
  const char *names[] = {"x", "label"};
  loom_tensor *x = loom_tensor_from_data(LOOM_F32, 2, (int64_t[]){N, 2}, xs, st);
  loom_tensor *y = loom_tensor_from_data(LOOM_I32, 1, (int64_t[]){N}, ys, st);
  loom_dataset *ds = x && y ? loom_dataset_from_tensors(2, names, (const loom_tensor *const[]){x, y}, "label", st)
                            : NULL;
  loom_tensor_free(x);
  loom_tensor_free(y);
  if (ds && mode == LOOM_MODE_TRAIN) ds = loom_dataset_repeat(loom_dataset_shuffle(ds, N, 1, 1, st), -1, st);
  return ds ? loom_dataset_batch(ds, 20, 0, st) : NULL;
}

static loom_code serving_fn(loom_graph *g, loom_features *f, loom_features *r, void *user, loom_status *st) {
  (void)user;
  loom_output x = loom_placeholder(g, LOOM_F32, 2, (int64_t[]){-1, 2}, "x");
  loom_code rc = loom_features_add(f, "x", x, st);
  return rc ? rc : loom_features_add(r, "x", x, st);
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  uint32_t s = 12345; /* a fixed LCG: two classes split by x0 + x1 = 0 */
  for (int i = 0; i < N; i++) {
    for (int k = 0; k < 2; k++) s = s * 1664525u + 1013904223u, xs[i][k] = (float)(s >> 8) / (1 << 23) - 1;
    ys[i] = xs[i][0] + xs[i][1] > 0;
  }
  char model_dir[512], base[600], exported[1024];
  snprintf(model_dir, sizeof model_dir, "%s/model", argv[1]);
  snprintf(base, sizeof base, "%s/export", model_dir);
  loom_status *st = loom_status_new();
  loom_fc_set *cols = loom_fc_set_new();
  const loom_fc *x = loom_fc_numeric(cols, "x", 1, (int64_t[]){2}, NULL, LOOM_F32, NULL, NULL, st);
  loom_dnn_options o = loom_dnn_options_default();
  o.model_dir = model_dir;
  o.hidden_units = (int64_t[]){8};
  o.nhidden_units = 1;
  o.feature_columns = &x;
  o.nfeature_columns = 1;
  o.n_classes = 2;
  o.optimizer.learning_rate = 0.1;
  loom_estimator *e = x ? loom_dnn_classifier_new(&o, st) : NULL;
  loom_train_options to = loom_train_options_default();
  to.steps = 300;
  loom_eval_result *r = NULL;
  double acc = 0;
  if (!e || loom_estimator_train(e, input_fn, NULL, &to, st) ||
      loom_estimator_evaluate(e, input_fn, NULL, NULL, &r, st) ||
      loom_eval_result_get(r, "accuracy", &acc, st) ||
      loom_estimator_export(e, serving_fn, NULL, base, NULL, exported, sizeof exported, st)) {
    fprintf(stderr, "dnn: %s\n", loom_status_message(st));
    return 1;
  }
  printf("accuracy=%.4f\nexport=%s\n", acc, exported);
  loom_eval_result_free(r);
  loom_estimator_free(e);
  loom_fc_set_free(cols);
  loom_status_free(st);
  return 0;
}
C
# shellcheck disable=SC2046
cc -std=c11 dnn.c -o dnn $(pkg-config --cflags --libs loom) 2>cc.log || { cat cc.log >&2; fail "cc dnn.c \$(pkg-config --cflags --libs loom)"; }
./dnn "$tmp/work/c" >dnn.out 2>dnn.log || { cat dnn.log dnn.out >&2; fail "the C program"; }
acc=$(sed -n 's/^accuracy=//p' dnn.out)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.95) }' || fail "C DNNClassifier: accuracy=$acc, want >= 0.95"
mkdir "$tmp/models/c_dnn" || fail "mkdir $tmp/models/c_dnn"
mv "$(sed -n 's/^export=//p' dnn.out)" "$tmp/models/c_dnn/1" || fail "moving the C export to models/c_dnn/1"
step "C DNNClassifier: accuracy=$acc, exported"

# 3. the command line on a CSV file
awk 'BEGIN { s = 12345; print "x0,x1,label";
  for (i = 0; i < 200; i++) { for (k = 0; k < 2; k++) { s = (s * 69069 + 1) % 4294967296; v[k] = s / 2147483648 - 1 }
    printf "%.6f,%.6f,%d\n", v[0], v[1], (v[0] + v[1] > 0) } }' >data.csv
cat >job.json <<JSON
{
  "data": {"format": "csv", "train": "$tmp/work/data.csv", "header": true, "eval_fraction": 0.25, "split_seed": 1,
           "columns": [{"name": "x0", "type": "float32"}, {"name": "x1", "type": "float32"},
                       {"name": "label", "type": "int64"}],
           "label": "label"},
  "feature_columns": [{"type": "numeric", "key": "x0"}, {"type": "numeric", "key": "x1"}],
  "model": {"type": "dnn_classifier", "hidden_units": [8], "n_classes": 2,
            "optimizer": {"name": "Adagrad", "learning_rate": 0.1}},
  "run_config": {"model_dir": "$tmp/work/cli", "random_seed": 1, "save_summary_steps": 0, "num_threads": 1},
  "train": {"batch_size": 20, "steps": 300, "shuffle": true}
}
JSON
loom train job.json --quiet >train.out 2>&1 || { cat train.out >&2; fail "loom train job.json"; }
loom evaluate job.json >eval.out 2>&1 || { cat eval.out >&2; fail "loom evaluate job.json"; }
acc=$(sed -n 's/^accuracy=//p' eval.out)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.9) }' || { cat eval.out >&2; fail "loom evaluate: accuracy=$acc, want >= 0.9"; }
loom export job.json >export.out 2>&1 || { cat export.out >&2; fail "loom export job.json"; }
cli_export=$(find "$tmp/work/cli/export" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | sort | tail -1)
[ -n "$cli_export" ] || { cat export.out >&2; fail "loom export wrote nothing under $tmp/work/cli/export"; }
mkdir "$tmp/models/cli_dnn" && mv "$cli_export" "$tmp/models/cli_dnn/1"
step "loom train/evaluate/export: accuracy=$acc"

# 4. Python, from a fresh venv
cd "$root" || exit 1
if ! command -v python3 >/dev/null; then echo "SKIPPED: newcomer python step: no python3"
elif ! $MAKE --no-print-directory -s wheel BUILD="$BUILD" >"$tmp/wheel.log" 2>&1; then
  if grep -q peer_venv "$tmp/wheel.log"; then echo "SKIPPED: newcomer python step: no venv with setuptools (PyPI unreachable?)"
  else cat "$tmp/wheel.log" >&2; fail "make wheel"; fi
else
  whl=$(find "$BUILD/python" -name 'loom-*.whl' | head -1)
  # the whole listing first: grep -q stops reading at its match and breaks python's pipe
  python3 -m zipfile -l "$whl" > "$tmp/wheel_files" || fail "$whl is not a readable wheel"
  grep -q '^loom/libloom\.so ' "$tmp/wheel_files" || fail "$whl does not bundle loom/libloom.so"
  case $whl in *-none-any.whl) fail "$whl bundles native code but is tagged for any platform";; esac
  python3 -m venv "$tmp/venv" >"$tmp/venv.log" 2>&1 || { cat "$tmp/venv.log" >&2; fail "python3 -m venv"; }
  if "$tmp/venv/bin/python" -m pip install -q "$whl" >"$tmp/pip.log" 2>&1; then
    (cd "$tmp/work" && "$tmp/venv/bin/python" "$root/scripts/python_smoke.py" "" "$root") >"$tmp/py.out" 2>&1 ||
      { cat "$tmp/py.out" >&2; fail "python from a fresh venv"; }
    step "python: $(basename "$whl") in a fresh venv: $(grep accuracy= "$tmp/py.out")"
  elif grep -qiE 'NewConnectionError|Temporary failure in name resolution|Network is unreachable|No matching distribution found' \
       "$tmp/pip.log"; then
    echo "SKIPPED: newcomer python step: PyPI unreachable from a fresh venv (numpy)"
  else
    cat "$tmp/pip.log" >&2; fail "pip install $whl into a fresh venv"
  fi
fi

# 5. serving both exports
loom-serve --model_base_path "$tmp/models" --port 0 --host 127.0.0.1 --poll_ms 100000 >"$tmp/serve.out" 2>"$tmp/serve.err" &
serve_pid=$!
port=
for _ in $(seq 100); do  # 10 s
  port=$(sed -n 's/^loom-serve: listening on .*:\([0-9]*\)$/\1/p' "$tmp/serve.out")
  [ -n "$port" ] && break
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || { cat "$tmp/serve.out" "$tmp/serve.err" >&2; fail "loom-serve printed no port"; }
for m in c_dnn cli_dnn; do
  case $m in c_dnn) body='{"signature_name": "predict", "instances": [{"x": [0.9, 0.8]}, {"x": [-0.7, -0.9]}]}';;
             *) body='{"signature_name": "predict", "instances": [{"x0": 0.9, "x1": 0.8}, {"x0": -0.7, "x1": -0.9}]}';; esac
  reply=$(curl -sS --max-time 10 -d "$body" "http://127.0.0.1:$port/v1/models/$m:predict" 2>&1) ||
    fail "curl $m:predict: $reply"
  # the two instances lie deep in class 1 and class 0
  ids=$(printf '%s' "$reply" | tr -d ' \n' | grep -o '"class_ids":\[[0-9]*\]' | grep -o '[0-9]*' | paste -sd,)
  [ "$ids" = "1,0" ] || fail "loom-serve $m:predict: class_ids '$ids', want 1,0; reply: $reply"
  step "loom-serve $m:predict: class_ids $ids"
done
kill "$serve_pid"; wait "$serve_pid" 2>/dev/null; serve_pid=
echo "newcomer: all passed"
