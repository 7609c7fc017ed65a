#!/usr/bin/env bash
# Creates (once) the virtualenv a peer script needs and prints its python.
#   scripts/peer_venv.sh tf      -> tensorflow-cpu 2.15 + tensorflow-estimator 2.15 (Python 3.11)
#   scripts/peer_venv.sh torch   -> CPU torch + numpy
#   scripts/peer_venv.sh onnx    -> onnxruntime + onnx + numpy (the ONNX export check)
#   scripts/peer_venv.sh tb      -> tensorboard + numpy (TensorBoard reading loom's event files)
#   scripts/peer_venv.sh py      -> numpy + pandas + pytest + setuptools + wheel (the Python package's
#                                   tests, python/: pandas for pandas_input_fn and the pandas programs)
# Venvs live in ${LOOM_VENV_DIR:-$HOME/.cache/loom/venv}/<name>; a finished one is
# marked with .ok and reused. Install output goes to <venv>.log (stderr gets a line).
set -euo pipefail
name=${1:?usage: peer_venv.sh tf|torch|onnx|tb|py}
root=${LOOM_VENV_DIR:-$HOME/.cache/loom/venv}
dir=$root/$name
if [ -f "$dir/.ok" ]; then
  # torch venvs made before numpy was in the list: the peer scripts read their data into numpy arrays
  if [ "$name" = torch ] && ! "$dir/bin/python" -c "import numpy" 2>/dev/null; then
    "$dir/bin/python" -m pip install -q numpy >>"$dir.log" 2>&1 || echo "peer_venv.sh: could not add numpy to $dir" >&2
  fi
  # py venvs made before pandas was in the list: the pandas_input_fn tests and programs skip without it
  if [ "$name" = py ] && ! "$dir/bin/python" -c "import pandas" 2>/dev/null; then
    "$dir/bin/python" -m pip install -q pandas >>"$dir.log" 2>&1 || echo "peer_venv.sh: could not add pandas to $dir" >&2
  fi
  echo "$dir/bin/python"; exit 0
fi
case $name in
  tf) pkgs="tensorflow-cpu==2.15.* tensorflow-estimator==2.15.* numpy<2"; py=python3.11 ;;
  torch) pkgs="torch numpy --index-url https://download.pytorch.org/whl/cpu"; py=python3 ;;
  onnx) pkgs="onnxruntime onnx numpy"; py=python3 ;;
  tb) pkgs="tensorboard numpy"; py=python3 ;;
  py) pkgs="numpy pandas pytest setuptools wheel"; py=python3 ;;
  *) echo "peer_venv.sh: unknown peer '$name' (tf, torch, onnx, tb or py)" >&2; exit 2 ;;
esac
command -v "$py" >/dev/null || py=python3
mkdir -p "$root"
echo "peer_venv.sh: creating $dir ($pkgs); log in $dir.log" >&2
rm -rf "$dir"
"$py" -m venv "$dir" >"$dir.log" 2>&1
"$dir/bin/python" -m pip install -q --upgrade pip >>"$dir.log" 2>&1
# shellcheck disable=SC2086
"$dir/bin/python" -m pip install -q $pkgs >>"$dir.log" 2>&1 || {
  # PyTorch's own CPU index is not reachable everywhere (only PyPI is, on some
  # machines): fall back to PyPI's torch wheel (larger: it carries CUDA libraries).
  if [ "$name" = torch ] && "$dir/bin/python" -m pip install -q torch numpy >>"$dir.log" 2>&1; then
    echo "peer_venv.sh: download.pytorch.org unreachable, installed PyPI's torch" >&2
  else
    echo "peer_venv.sh: pip install failed for $name (see $dir.log)" >&2; exit 1
  fi; }
touch "$dir/.ok"
echo "$dir/bin/python"
