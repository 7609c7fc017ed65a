#!/usr/bin/env bash
# Runs every test binary, then prints one closing line: "N passed, N failed".
set -u
pass=0; fail=0; failed=()
for t in "$@"; do
  out=$("$t" --jobs 2 2>&1); rc=$?
  line=$(printf '%s\n' "$out" | grep -E '^\[====\] Synthesis:' | tail -1)
  p=$(printf '%s' "$line" | sed -nE 's/.*Passing: ([0-9]+).*/\1/p')
  f=$(printf '%s' "$line" | sed -nE 's/.*Failing: ([0-9]+).*/\1/p')
  c=$(printf '%s' "$line" | sed -nE 's/.*Crashing: ([0-9]+).*/\1/p')
  p=${p:-0}; f=${f:-0}; c=${c:-0}
  if [ $rc -ne 0 ] && [ $((f + c)) -eq 0 ]; then f=1; fi
  pass=$((pass + p)); fail=$((fail + f + c))
  printf '%-40s %s\n' "$(basename "$t")" "${line:-exit $rc}"
  # what a test says on stderr for the log: a peer check it skipped, the ONNX Runtime differences
  printf '%s\n' "$out" | grep -E '^(SKIPPED: |onnx_check: )' | sed 's/^/    /'
  if [ $rc -ne 0 ]; then failed+=("$t"); printf '%s\n' "$out" | grep -vE '^\[====\]' | head -60; fi
done
echo
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
