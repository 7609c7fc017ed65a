#!/usr/bin/env bash
# GPU benchmarks (make bench-gpu; needs an NVIDIA GPU and a CUDA=1 build in
# build/cuda): loom's MatMul vs a raw cuBLAS call in the same run, and the MLP
# and CNN training steps vs PyTorch on the same GPU with the same batch.
# Prints key=value lines and ratios; compare ratios, not absolute times.
#   EPOCHS (default 2), BATCHES (default "128 1024"), BUILD (default build/cuda), PYTHON (default python3)
# Each training step is measured four ways in the same run: loom with whole-step CUDA
# graphs (the default), loom with LOOM_CUDA_GRAPHS=0 (one launch per kernel), PyTorch eager, and
# PyTorch with the whole step captured as a CUDA graph (bench/peers/torch_cuda_graph.py).
set -u
PY=${PYTHON:-python3}
BUILD=${BUILD:-build/cuda}
EPOCHS=${EPOCHS:-2}
BATCHES=${BATCHES:-"128 1024"}
get() { printf '%s\n' "$1" | sed -n "s/^$2=//p" | head -1; }
ratio() { python3 -c "import sys; a,b=sys.argv[1:]; print('%.3f' % (float(a)/float(b)) if a and b else 'nan')" "$1" "$2" 2>/dev/null || echo nan; }
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "bench-gpu: no NVIDIA GPU visible, skipping"; exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/gpu=/'
"$PY" -c "import torch; print('torch=%s torch_cuda=%s' % (torch.__version__, torch.cuda.is_available()))" 2>/dev/null \
  || echo "torch=absent (pip install torch for the peer)"
echo "== ops --device cuda (MatMul vs raw cuBLAS)"
"$BUILD/bench/ops" --device cuda --iters 200
for b in $BATCHES; do
  for opt in sgd adam; do
    echo "== mlp opt=$opt batch=$b device=cuda"
    loom=$("$BUILD/bench/mlp_train" --device cuda --opt "$opt" --batch "$b" --epochs "$EPOCHS")
    loom_nograph=$(LOOM_CUDA_GRAPHS=0 "$BUILD/bench/mlp_train" --device cuda --opt "$opt" --batch "$b" --epochs "$EPOCHS")
    torch=$("$PY" bench/peers/torch_mlp.py --device cuda --opt "$opt" --batch "$b" --epochs "$EPOCHS" --fp32 1 2>/dev/null)
    torch_graph=$("$PY" bench/peers/torch_cuda_graph.py --model mlp --opt "$opt" --batch "$b" --epochs "$EPOCHS" --fp32 1 2>/dev/null)
    for impl in loom loom_nograph torch torch_graph; do
      out=${!impl}
      for k in step_us steps_per_sec test_accuracy device; do
        v=$(get "$out" $k); [ -n "$v" ] && echo "gpu_mlp_${opt}_b${b}_${impl}_${k}=$v"
      done
    done
    echo "gpu_mlp_${opt}_b${b}_loom_vs_torch_step=$(ratio "$(get "$loom" step_us)" "$(get "$torch" step_us)")"
    echo "gpu_mlp_${opt}_b${b}_loom_vs_torch_graph_step=$(ratio "$(get "$loom" step_us)" "$(get "$torch_graph" step_us)")"
    echo "gpu_mlp_${opt}_b${b}_loom_graph_vs_nograph_step=$(ratio "$(get "$loom" step_us)" "$(get "$loom_nograph" step_us)")"
  done
  # FP32 against FP32, then TF32 against PyTorch's default (its convolutions use TF32 unless told not to)
  echo "== cnn adam batch=$b device=cuda"
  cnn=$("$BUILD/bench/cnn_train" --device cuda --batch "$b" --epochs 1)
  cnn_nograph=$(LOOM_CUDA_GRAPHS=0 "$BUILD/bench/cnn_train" --device cuda --batch "$b" --epochs 1)
  tc=$("$PY" bench/peers/torch_cnn.py --device cuda --batch "$b" --epochs 1 --fp32 1 2>/dev/null)
  tcg=$("$PY" bench/peers/torch_cuda_graph.py --model cnn --batch "$b" --epochs 1 --fp32 1 2>/dev/null)
  cnn32=$(LOOM_CUDA_TF32=1 "$BUILD/bench/cnn_train" --device cuda --batch "$b" --epochs 1)
  tc32=$("$PY" bench/peers/torch_cnn.py --device cuda --batch "$b" --epochs 1 2>/dev/null)
  printf '%s\n' "$cnn" | sed "s/^/gpu_cnn_b${b}_loom_/"
  printf '%s\n' "$cnn_nograph" | sed "s/^/gpu_cnn_b${b}_loom_nograph_/"
  printf '%s\n' "$tc" | sed "s/^/gpu_cnn_b${b}_torch_/"
  printf '%s\n' "$tcg" | sed "s/^/gpu_cnn_b${b}_torch_graph_/"
  printf '%s\n' "$cnn32" | sed "s/^/gpu_cnn_b${b}_loom_tf32_/"
  printf '%s\n' "$tc32" | sed "s/^/gpu_cnn_b${b}_torch_default_/"
  echo "gpu_cnn_b${b}_loom_vs_torch_step=$(ratio "$(get "$cnn" step_us)" "$(get "$tc" step_us)")"
  echo "gpu_cnn_b${b}_loom_vs_torch_graph_step=$(ratio "$(get "$cnn" step_us)" "$(get "$tcg" step_us)")"
  echo "gpu_cnn_b${b}_loom_graph_vs_nograph_step=$(ratio "$(get "$cnn" step_us)" "$(get "$cnn_nograph" step_us)")"
  echo "gpu_cnn_b${b}_loom_tf32_vs_torch_default_step=$(ratio "$(get "$cnn32" step_us)" "$(get "$tc32" step_us)")"
done
