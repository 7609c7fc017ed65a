#!/usr/bin/env bash
# cc_obj.sh OBJ SRC OLD CC FLAGS...: compiles SRC into OBJ (`CC FLAGS -c SRC -o OBJ`), the
# library's object rule. Beside OBJ it writes OBJ.pp: a hash of what the compile depends on, namely
# SRC preprocessed with FLAGS (`CC FLAGS -E`, line markers included, so every -D/-I that matters is
# in it), CC and FLAGS less the preprocessor-only ones (-D, -I, -isystem, -MMD, -MP, -MF, -MT).
# When OLD (the same object in another build folder of this tree, or "") exists with an OLD.pp
# written after it that holds the same hash, OBJ is a copy of OLD instead of a new compile: the
# same compiler on the same preprocessed text with the same code-generation flags writes the same
# object. So the build variants that `make test` compiles besides the main one (build/cpu or
# build/cuda, build/cuemu) compile only the files that their -D/-I change (the CUDA backend's) and
# preprocess the rest, every file still checked against the variant's own headers and macros.
set -uo pipefail
obj=$1 src=$2 old=$3; shift 3
# the code-generation flags: FLAGS less the preprocessor-only ones
gen=() skip=0
for a in "${@:2}"; do
  if [ $skip = 1 ]; then skip=0; continue; fi
  case $a in
    -MF|-MT|-MQ|-isystem|-include|-I|-D) skip=1 ;;
    -D*|-I*|-MMD|-MP|-MD) ;;
    *) gen+=("$a") ;;
  esac
done
rm -f "$obj.pp"
# SRC preprocessed, its dependency file written on the way as the compile writes it (a failure here
# is left to the compile below to report)
if pp=$("$@" -E -MF "${obj%.o}.d" -MT "$obj" "$src" 2>/dev/null | md5sum); then
  hash=$({ echo "$pp"; printf '%s\n' "$1" "${gen[@]}"; } | md5sum | cut -c1-32)
else
  hash=
fi
if [ -n "$hash" ] && [ -n "$old" ] && [ -f "$old" ] && [ -f "$old.pp" ] && [ ! "$old" -nt "$old.pp" ] &&
   [ "$(cat "$old.pp")" = "$hash" ]; then
  cp "$old" "$obj" || exit 1
else
  "$@" -c "$src" -o "$obj" || exit 1
fi
if [ -n "$hash" ]; then echo "$hash" > "$obj.pp"; fi
