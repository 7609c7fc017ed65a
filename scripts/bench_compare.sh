#!/usr/bin/env bash
# Runs loom, the hand-written C+OpenBLAS floor and PyTorch side by side on the
# same recipe and prints key=value lines plus ratios. Machines are noisy:
# compare the ratios, not absolute times.
#   EPOCHS (default 5), THREADS (default "1 2"), OPTS (default "sgd adam"), BUILD (default build)
set -u
# Debian's OpenBLAS 0.3.21 does not recognise recent AMD cores and falls back
# to Haswell kernels; on AVX-512 machines pick the SkylakeX kernels (1.7x
# faster here). It applies to loom and the floor alike (both call OpenBLAS).
if grep -q avx512f /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SKYLAKEX}; fi
echo "openblas_coretype=${OPENBLAS_CORETYPE:-auto}"
BUILD=${BUILD:-build}
EPOCHS=${EPOCHS:-5}
THREADS=${THREADS:-"1 2"}
OPTS=${OPTS:-"sgd adam"}
# PyTorch from its virtualenv (scripts/peer_venv.sh torch); the system python3 if that cannot be made
TORCH_PY=$(scripts/peer_venv.sh torch 2>/dev/null) || TORCH_PY=python3
get() { printf '%s\n' "$1" | sed -n "s/^$2=//p" | head -1; }
ratio() { python3 -c "import sys; a,b=sys.argv[1:]; print('%.3f' % (float(a)/float(b)) if a and b else 'nan')" "$1" "$2" 2>/dev/null || echo nan; }
for opt in $OPTS; do
  for t in $THREADS; do
    echo "== mlp opt=$opt threads=$t epochs=$EPOCHS"
    floor=$("$BUILD/bench/mlp_floor" --opt "$opt" --epochs "$EPOCHS" --threads "$t")
    loom=$("$BUILD/bench/mlp_train" --opt "$opt" --epochs "$EPOCHS" --threads "$t")
    torch=$("$TORCH_PY" bench/peers/torch_mlp.py --opt "$opt" --epochs "$EPOCHS" --threads "$t" 2>/dev/null)
    for impl in floor loom torch; do
      out=${!impl}
      for k in step_us steps_per_sec test_accuracy peak_rss_mb blas_fraction skipped; do
        v=$(get "$out" $k); [ -n "$v" ] && echo "mlp_${opt}_t${t}_${impl}_${k}=$v"
      done
    done
    echo "mlp_${opt}_t${t}_loom_vs_floor_step=$(ratio "$(get "$loom" step_us)" "$(get "$floor" step_us)")"
    echo "mlp_${opt}_t${t}_loom_vs_floor_rss=$(ratio "$(get "$loom" peak_rss_mb)" "$(get "$floor" peak_rss_mb)")"
    echo "mlp_${opt}_t${t}_loom_vs_torch_step=$(ratio "$(get "$loom" step_us)" "$(get "$torch" step_us)")"
  done
done
if [ -x "$BUILD/bench/cnn_train" ]; then
  echo "== cnn adam threads=1"
  cnn=$("$BUILD/bench/cnn_train" --threads 1 --epochs 1); printf '%s\n' "$cnn" | sed 's/^/cnn_loom_/'
  tc=$("$TORCH_PY" bench/peers/torch_cnn.py --threads 1 --epochs 1 2>/dev/null); printf '%s\n' "$tc" | sed 's/^/cnn_torch_/'
  echo "cnn_loom_vs_torch_step=$(ratio "$(get "$cnn" step_us)" "$(get "$tc" step_us)")"
fi
if [ -x "$BUILD/bench/ops" ]; then
  echo "== ops threads=1"
  "$BUILD/bench/ops" --threads 1
fi
if [ -x "$BUILD/bench/estimator_overhead" ]; then
  echo "== estimator harness vs raw session loop (threads=2)"
  "$BUILD/bench/estimator_overhead" --threads 2 2>/dev/null | sed 's/^/est_/'
fi
if [ -x "$BUILD/bench/predict_latency" ]; then
  echo "== resident predictor vs raw BLAS forward (threads=1)"
  "$BUILD/bench/predict_latency" --threads 1 | sed 's/^/predict_/'
fi
