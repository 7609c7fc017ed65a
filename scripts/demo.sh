#!/usr/bin/env bash
# The main job: train an MLP on Debian's Fashion-MNIST through loom's graph
# API (variables, autodiff, Adam), evaluate it on the test set.
set -euo pipefail
BUILD=${BUILD:-build}
if grep -q avx512f /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-SKYLAKEX}; fi
if [ -x "$BUILD/examples/fashion_mnist" ]; then
  exec "$BUILD/examples/fashion_mnist" "$@"
fi
out=$("$BUILD/bench/mlp_train" --opt adam --epochs "${EPOCHS:-3}" --threads "$(nproc)")
printf '%s\n' "$out"
printf 'test_accuracy=%s\n' "$(printf '%s\n' "$out" | sed -n 's/^test_accuracy=//p')"
