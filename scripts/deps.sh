#!/usr/bin/env bash
# Installs the Debian packages loom needs, only when something is missing.
# Idempotent and non-interactive: on a machine that has everything it does nothing.
# Arguments name further packages a script needs beyond these (bench/scaling: gnuplot-nox).
set -eu
PKGS="build-essential pkg-config libopenblas-dev libcriterion-dev zlib1g-dev libuv1-dev libcjson-dev libprotobuf-c-dev protobuf-c-compiler libssl-dev node-llhttp curl dataset-fashion-mnist python3-sklearn python3-requests python3-prometheus-client clang libclang-rt-14-dev qemu-user openmpi-bin libopenmpi-dev libgloo-dev slurmctld slurmd slurm-client nftables $*"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
