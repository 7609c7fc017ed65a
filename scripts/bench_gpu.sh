#!/usr/bin/env bash
# GPU benchmarks (make bench-gpu; needs an NVIDIA GPU and a CUDA=1 build in
# build/cuda): loom's MatMul vs a raw cuBLAS call in the same run, and the MLP
# and CNN training steps vs PyTorch on the same GPU with the same batch.
# Prints key=value lines and ratios; compare ratios, not absolute times.
#   EPOCHS (default 2), BATCHES (default "128 1024"), BUILD (default build/cuda)
set -u
BUILD=${BUILD:-build/cuda}
EPOCHS=${EPOCHS:-2}
BATCHES=${BATCHES:-"128 1024"}
get() { printf '%s\n' "$1" | sed -n "s/^$2=//p" | head -1; }
ratio() { python3 -c "import sys; a,b=sys.argv[1:]; print('%.3f' % (float(a)/float(b)) if a and b else 'nan')" "$1" "$2" 2>/dev/null || echo nan; }
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bench-gpu: no NVIDIA GPU visible, skipping"; exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/gpu=/'
python3 -c "import torch; print('torch=%s torch_cuda=%s' % (torch.__version__, torch.cuda.is_available()))" 2>/dev/null \
  || echo "torch=absent (pip install torch for the peer)"
echo "== ops --device cuda (MatMul vs raw cuBLAS)"
"$BUILD/bench/ops" --device cuda --iters 200
for b in $BATCHES; do
  for opt in sgd adam; do
    echo "== mlp opt=$opt batch=$b device=cuda"
    loom=$("$BUILD/bench/mlp_train" --device cuda --opt "$opt" --batch "$b" --epochs "$EPOCHS")
    torch=$(python3 bench/peers/torch_mlp.py --device cuda --opt "$opt" --batch "$b" --epochs "$EPOCHS" --fp32 1 2>/dev/null)
    for impl in loom torch; do
      out=${!impl}
      for k in step_us steps_per_sec test_accuracy device; do
        v=$(get "$out" $k); [ -n "$v" ] && echo "gpu_mlp_${opt}_b${b}_${impl}_${k}=$v"
      done
    done
    echo "gpu_mlp_${opt}_b${b}_loom_vs_torch_step=$(ratio "$(get "$loom" step_us)" "$(get "$torch" step_us)")"
  done
  # FP32 against FP32, then TF32 against PyTorch's default (its convolutions use TF32 unless told not to)
  echo "== cnn adam batch=$b device=cuda"
  cnn=$("$BUILD/bench/cnn_train" --device cuda --batch "$b" --epochs 1)
  tc=$(python3 bench/peers/torch_cnn.py --device cuda --batch "$b" --epochs 1 --fp32 1 2>/dev/null)
  cnn32=$(LOOM_CUDA_TF32=1 "$BUILD/bench/cnn_train" --device cuda --batch "$b" --epochs 1)
  tc32=$(python3 bench/peers/torch_cnn.py --device cuda --batch "$b" --epochs 1 2>/dev/null)
  printf '%s\n' "$cnn" | sed "s/^/gpu_cnn_b${b}_loom_/"
  printf '%s\n' "$tc" | sed "s/^/gpu_cnn_b${b}_torch_/"
  printf '%s\n' "$cnn32" | sed "s/^/gpu_cnn_b${b}_loom_tf32_/"
  printf '%s\n' "$tc32" | sed "s/^/gpu_cnn_b${b}_torch_default_/"
  echo "gpu_cnn_b${b}_loom_vs_torch_step=$(ratio "$(get "$cnn" step_us)" "$(get "$tc" step_us)")"
  echo "gpu_cnn_b${b}_loom_tf32_vs_torch_default_step=$(ratio "$(get "$cnn32" step_us)" "$(get "$tc32" step_us)")"
done
