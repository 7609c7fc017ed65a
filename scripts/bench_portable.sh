#!/usr/bin/env bash
# Portable build vs NATIVE=1 build on this machine (README "Portable build"): the same benchmarks
# from $PORTABLE (default build/) and $NATIVE (default build/native), interleaved A B A B for
# ROUNDS rounds so that load from other processes falls on both alike; prints each run's figure
# and the median ratio portable/native (time: > 1 is slower; add: ratio of us).
# Build first: make bench; make NATIVE=1 BUILD=build/native build/native/bench/{mlp_train,cnn_train,ops}
set -u
P=${PORTABLE:-build}; N=${NATIVE:-build/native}; R=${ROUNDS:-5}
med() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
run() { # build key cmd...
  local b=$1 k=$2; shift 2
  "$b/bench/$@" 2>/dev/null | sed -n "s/^$k=//p" | tail -1
}
declare -A got
cases=("mlp_sgd step_us mlp_train --steps 300" "mlp_adam step_us mlp_train --steps 300 --opt adam"
       "cnn step_us cnn_train --steps 8 --eval 0" "add1m add_1m_loom_us ops")
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
  p=$(printf '%s\n' ${got[$name.portable]} | med); n=$(printf '%s\n' ${got[$name.native]} | med)
  printf '%s_portable=%s %s_native=%s %s_portable_over_native=%.3f\n' "$name" "$p" "$name" "$n" "$name" \
    "$(awk -v a="$p" -v b="$n" 'BEGIN{print a/b}')"
done
