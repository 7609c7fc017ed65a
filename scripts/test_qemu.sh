#!/usr/bin/env bash
# The portable build's tests on emulated older CPUs (docs/build.md): every program given
# runs under qemu-x86_64 (Debian's qemu-user) once per CPU model in QEMU_CPUS. The programs are
# built against the in-process Criterion shim (tests/tsan/criterion/), so each one stays inside
# the emulator: Criterion's own runner re-executes the binary, and that child would run on the host
# CPU. An instruction the emulated CPU lacks is a SIGILL, i.e. a crash here.
# The (cpu, program) runs go QEMU_JOBS at a time (default: the CPUs this process may use); prints
# one line per run in order and closes with "N passed, N failed".
set -u
QEMU=${QEMU:-$(command -v qemu-x86_64)}
if [ -z "$QEMU" ]; then echo "test-qemu: qemu-x86_64 not found (apt-get install qemu-user)"; exit 1; fi
jobs=${QEMU_JOBS:-$(nproc 2>/dev/null || echo 1)}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
runs=()
for cpu in ${QEMU_CPUS:-Nehalem Haswell}; do
  for t in "$@"; do runs+=("$cpu $t"); done
done
run_one() {  # index cpu program: the run's output, exit status and seconds into $tmp/<index>.*
  local i=$1 cpu=$2 t=$3 start
  start=$(date +%s)
  # OpenBLAS's kernels for the emulated model, not whatever the caller's environment forces (an
  # OPENBLAS_CORETYPE=Haswell inherited from the host made OpenBLAS run AVX2 on the emulated Nehalem)
  OPENBLAS_CORETYPE=$cpu "$QEMU" -cpu "$cpu" "$t" > "$tmp/$i.out" 2>&1
  echo "$? $(( $(date +%s) - start ))" > "$tmp/$i.rc"
}
for i in "${!runs[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  run_one "$i" ${runs[$i]} &
done
wait
pass=0; fail=0
for i in "${!runs[@]}"; do
  read -r cpu t <<< "${runs[$i]}"
  read -r rc secs < "$tmp/$i.rc"
  out=$(cat "$tmp/$i.out")
  line=$(printf '%s\n' "$out" | grep -E '^\[====\] Synthesis:' | tail -1)
  p=$(printf '%s' "$line" | sed -nE 's/.*Passing: ([0-9]+).*/\1/p'); p=${p:-0}
  f=$(printf '%s' "$line" | sed -nE 's/.*Failing: ([0-9]+).*/\1/p'); f=${f:-0}
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  pass=$((pass + p)); fail=$((fail + f))
  printf '%-9s %-28s %s (%ss)\n' "$cpu" "$(basename "$t")" "${line:-exit $rc}" "$secs"
  if [ "$rc" -ne 0 ]; then printf '%s\n' "$out" | grep -vE '^\[====\]' | tail -30; fi
done
echo
echo "test-qemu: $pass passed, $fail failed"
[ $fail -eq 0 ]
