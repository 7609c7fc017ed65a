#!/usr/bin/env bash
# fuzz.sh run SECONDS NAME...   : each target build/fuzz/fuzz_NAME for SECONDS from fuzz/corpus/NAME
#                                 (+ build/fuzz/corpus/NAME for what it finds); prints executions per target.
#                                 FUZZ_RUNS=N (environment) also ends a target after N executions,
#                                 whichever comes first. fuzz/NAME.options adds libFuzzer flags (they come
#                                 after the defaults, so e.g. its -max_len wins); fuzz/NAME.asan_options
#                                 is added to ASAN_OPTIONS (both modes).
# fuzz.sh replay 0 NAME...      : $BUILD/fuzz-replay/fuzz_NAME (the target + fuzz/driver.c) once over every
#                                 committed input of fuzz/corpus/NAME (no new inputs)
# fuzz.sh merge 0 NAME...       : fuzz/corpus/NAME := the inputs of fuzz/corpus/NAME and build/fuzz/corpus/NAME
#                                 that add coverage (libFuzzer -merge=1), plus every named (not SHA-1
#                                 named) seed of fuzz/corpus/NAME kept under its name
set -u
mode=$1; secs=$2; shift 2
rc=0
for n in "$@"; do
  bin=build/fuzz/fuzz_$n
  seeds=fuzz/corpus/$n
  dict=fuzz/$n.dict
  if [ "$mode" = merge ]; then
    tmp=$(mktemp -d)
    san=$(cat "fuzz/$n.asan_options" 2>/dev/null)
    mkdir -p "build/fuzz/corpus/$n"
    if ! ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}$san" "$bin" -merge=1 -max_len=65536 -rss_limit_mb=2048 \
         "$tmp" "$seeds" "build/fuzz/corpus/$n" >"build/fuzz/$n.merge.log" 2>&1; then
      echo "fuzz-merge $n: FAILED, see build/fuzz/$n.merge.log"; rm -rf "$tmp"; rc=1; continue
    fi
    for f in "$seeds"/*; do
      b=$(basename "$f")
      [[ "$b" =~ ^[0-9a-f]{40}$ ]] && continue
      cp "$f" "$tmp/$b"; rm -f "$tmp/$(sha1sum "$f" | cut -c1-40)"
    done
    before=$(find "$seeds" -type f | wc -l)
    rm -rf "$seeds"; mkdir -p "$seeds"; cp "$tmp"/* "$seeds"/; rm -rf "$tmp"
    printf 'fuzz-merge %-12s %4d -> %4d inputs (%s bytes)\n' "$n" "$before" "$(find "$seeds" -type f | wc -l)" \
      "$(cat "$seeds"/* | wc -c)"
  elif [ "$mode" = replay ]; then
    rbin=${BUILD:-build}/fuzz-replay/fuzz_$n
    cnt=$(find "$seeds" -type f 2>/dev/null | wc -l)
    if [ "$cnt" -eq 0 ]; then echo "fuzz-replay: $n: no corpus in $seeds"; rc=1; continue; fi
    san=$(cat "fuzz/$n.asan_options" 2>/dev/null)
    if out=$(LOOM_FUZZ_REPLAY=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}$san" "$rbin" "$seeds" 2>&1); then
      printf 'fuzz-replay %-12s %4d inputs, no crash\n' "$n" "$cnt"
    else
      printf 'fuzz-replay %-12s FAILED\n' "$n"; printf '%s\n' "$out" | tail -40; rc=1
    fi
  else
    mkdir -p "build/fuzz/corpus/$n" "build/fuzz/crashes/$n"
    extra=()
    [ -f "$dict" ] && extra+=("-dict=$dict")
    [ -f "fuzz/$n.options" ] && extra+=($(cat "fuzz/$n.options"))
    log=build/fuzz/$n.log
    san=$(cat "fuzz/$n.asan_options" 2>/dev/null)
    [ -n "${FUZZ_RUNS:-}" ] && extra=(-runs="$FUZZ_RUNS" "${extra[@]}")
    t0=$(date +%s)
    ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}$san" "$bin" -max_total_time="$secs" -print_final_stats=1 -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
      -artifact_prefix="build/fuzz/crashes/$n/" "${extra[@]}" "build/fuzz/corpus/$n" "$seeds" >"$log" 2>&1
    r=$?
    t1=$(date +%s)
    execs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+)/\1/p' "$log" | tail -1)
    if [ $r -eq 0 ]; then
      printf 'fuzz %-12s %10s executions in %ss, no crash\n' "$n" "${execs:-?}" "$((t1 - t0))"
    else
      printf 'fuzz %-12s %10s executions: CRASH (exit %d), see %s and build/fuzz/crashes/%s/\n' "$n" "${execs:-?}" $r "$log" "$n"
      grep -E '^(==[0-9]+==ERROR|SUMMARY|.*runtime error)' "$log" | head -5; rc=1
    fi
  fi
done
exit $rc
