#!/usr/bin/env bash
# Portable build vs NATIVE=1 build on this machine (docs/build.md): the same benchmarks
# from $PORTABLE (default build/) and $NATIVE (default build/native), interleaved A B A B for
# ROUNDS rounds so that load from other processes falls on both alike; prints each run's figure
# and the median over rounds of the per-round ratio portable/native (> 1: portable is slower). The
# training steps are compared on step_cpu_us (median process CPU time per step), which the other
# processes of a shared machine move much less than wall time; add_1m on wall time.
# Build first: make bench; make NATIVE=1 BUILD=build/native build/native/bench/{mlp_train,cnn_train,ops}
set -u
P=${PORTABLE:-build}; N=${NATIVE:-build/native}; R=${ROUNDS:-5}
med() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
run() { # build key cmd...
  local b=$1 k=$2; shift 2
  "$b/bench/$@" 2>/dev/null | sed -n "s/^$k=//p" | tail -1
}
declare -A got
cases=("mlp_sgd step_cpu_us mlp_train --steps 300" "mlp_adam step_cpu_us mlp_train --steps 300 --opt adam"
       "cnn step_cpu_us cnn_train --steps 12 --eval 0" "add1m add_1m_loom_us ops")
for ((r = 0; r < R; r++)); do
  for c in "${cases[@]}"; do
    set -- $c; name=$1; key=$2; shift 2
    for side in portable native; do
      d=$P; [ $side = native ] && d=$N
      v=$(run "$d" "$key" "$@")
      got[$name.$side]+="$v "
      echo "round=$r case=$name build=$side $key=$v"
    done
  done
done
echo
for c in "${cases[@]}"; do
  set -- $c; name=$1
  p=(${got[$name.portable]}); n=(${got[$name.native]})
  ratios=$(for ((i = 0; i < ${#p[@]}; i++)); do awk -v a="${p[$i]}" -v b="${n[$i]}" 'BEGIN{if (a > 0 && b > 0) print a/b}'; done)
  printf '%s_portable=%s %s_native=%s %s_portable_over_native=%.3f (per-round: %s)\n' "$name" \
    "$(printf '%s\n' "${p[@]}" | med)" "$name" "$(printf '%s\n' "${n[@]}" | med)" "$name" \
    "$(printf '%s\n' $ratios | med)" "$(printf '%s\n' $ratios | awk '{printf "%.3f ", $1}')"
done
