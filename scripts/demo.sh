#!/usr/bin/env bash
# The main job: examples/fashion_mnist (Estimator: train, evaluate, export,
# predictor) on Debian's Fashion-MNIST; falls back to bench/mlp_train.
set -euo pipefail
BUILD=${BUILD:-build}
if grep -q avx512f /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SKYLAKEX}; fi
if [ -x "$BUILD/examples/fashion_mnist" ]; then
  exec "$BUILD/examples/fashion_mnist" "$@"
fi
out=$("$BUILD/bench/mlp_train" --opt adam --epochs "${EPOCHS:-3}" --threads "$(nproc)")
printf '%s\n' "$out"
printf 'test_accuracy=%s\n' "$(printf '%s\n' "$out" | sed -n 's/^test_accuracy=//p')"
