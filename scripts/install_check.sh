#!/usr/bin/env bash
# `make install-check`: installs loom into a temporary prefix and uses it as a
# consumer would. Checks: a C program built with `pkg-config --cflags --libs
# loom` (PKG_CONFIG_PATH at the prefix) runs without LD_LIBRARY_PATH and loads
# the prefix's libloom.so; the same program built with `pkg-config --libs
# loom-static` has no libloom.so dependency and gives the same result; the
# installed `loom --help` and `loom-serve --help` run; `make uninstall` leaves
# no file of loom under the prefix and keeps the files it did not install.
# Exit status 0 when every check passed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
MAKE=${MAKE:-make}
BUILD=${BUILD:-build}
tmp=$(mktemp -d /tmp/loom_install_check_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fails=0
ok() { echo "install-check: ok: $*"; }
bad() { echo "install-check: FAIL: $*" >&2; fails=$((fails + 1)); }

# Files of someone else in the prefix, which uninstall must keep.
mkdir -p "$prefix/bin" "$prefix/lib/pkgconfig"
echo other >"$prefix/bin/other-tool"
echo other >"$prefix/lib/pkgconfig/other.pc"

if ! $MAKE --no-print-directory -s install PREFIX="$prefix" BUILD="$BUILD" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log" >&2; echo "install-check: FAIL: make install PREFIX=$prefix" >&2; exit 1
fi

# A header an earlier version installed and this one no longer has: a reinstall keeps it in the
# manifest, so that uninstall still removes it.
echo '/* old */' >"$prefix/include/loom/loom_old.h"
echo "$prefix/include/loom/loom_old.h" >>"$prefix/share/loom/install_manifest.txt"
$MAKE --no-print-directory -s install PREFIX="$prefix" BUILD="$BUILD" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; bad "make install again into $prefix"; }
if grep -qx "$prefix/include/loom/loom_old.h" "$prefix/share/loom/install_manifest.txt"; then
  ok "a reinstall keeps the manifest's earlier files"
else bad "a reinstall dropped $prefix/include/loom/loom_old.h from the manifest"; fi
out=$($MAKE --no-print-directory -s install PREFIX=relative/prefix BUILD="$BUILD" 2>&1) &&
  bad "make install PREFIX=relative/prefix succeeded"
case $out in *"PREFIX must be an absolute path, got 'relative/prefix'"*) ok "a relative PREFIX is refused";;
  *) bad "make install PREFIX=relative/prefix: $out";; esac
[ ! -e relative ] || { bad "make install PREFIX=relative/prefix created ./relative"; rm -rf relative; }

# A consumer program: a graph with a matmul run by a session (the op table
# comes from libloom's static initializers, which the static link must keep).
cat >"$tmp/consumer.c" <<'C'
#include <stdio.h>
#include "loom/loom.h"
int main(void) {
  loom_status *st = loom_status_new();
  loom_graph *g = loom_graph_new();
  const float a[4] = {1, 2, 3, 4}, b[2] = {5, 6};
  loom_output x = loom_const_data(g, LOOM_F32, 2, (int64_t[]){2, 2}, a, "a");
  loom_output y = loom_const_data(g, LOOM_F32, 2, (int64_t[]){2, 1}, b, "b");
  loom_output z = loom_matmul(g, x, y, 0, 0, "z");
  loom_session *s = loom_session_new(g, NULL, st);
  loom_tensor *out = NULL;
  if (!s || loom_session_run(s, NULL, NULL, 0, &z, &out, 1, NULL, 0, st)) {
    fprintf(stderr, "consumer: %s\n", loom_status_message(st));
    return 1;
  }
  const float *v = loom_tensor_data(out);
  printf("loom %s: [[1 2] [3 4]] x [5 6] = [%g %g]\n", loom_version(), v[0], v[1]);
  loom_tensor_free(out);
  loom_session_free(s);
  loom_graph_free(g);
  loom_status_free(st);
  return 0;
}
C
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
want="= [17 39]"
# shellcheck disable=SC2046
if cc -std=c11 "$tmp/consumer.c" -o "$tmp/consumer" $(pkg-config --cflags --libs loom) 2>"$tmp/cc.log"; then
  out=$(env -u LD_LIBRARY_PATH "$tmp/consumer" 2>&1)
  case $out in *"$want") ok "shared: $out";; *) bad "shared build without LD_LIBRARY_PATH: $out";; esac
  lib=$(env -u LD_LIBRARY_PATH ldd "$tmp/consumer" | grep -F libloom.so)
  case $lib in *"=> $prefix/lib/libloom.so.${SOVERSION:?} "*) ok "shared: ldd:$lib";;
    *) bad "shared build: ldd says '$lib', not $prefix/lib/libloom.so.${SOVERSION:?}";; esac
else
  cat "$tmp/cc.log" >&2; bad "cc consumer.c \$(pkg-config --cflags --libs loom)"
fi
# shellcheck disable=SC2046
if cc -std=c11 "$tmp/consumer.c" -o "$tmp/consumer_static" $(pkg-config --cflags --libs loom-static) 2>"$tmp/cc.log"; then
  out=$(env -u LD_LIBRARY_PATH "$tmp/consumer_static" 2>&1)
  case $out in *"$want") ok "static: $out";; *) bad "static build: $out";; esac
  if readelf -d "$tmp/consumer_static" | grep -q 'NEEDED.*libloom'; then bad "static build still needs libloom.so"
  else ok "static: no libloom.so dependency"; fi
else
  cat "$tmp/cc.log" >&2; bad "cc consumer.c \$(pkg-config --cflags --libs loom-static)"
fi

for prog in loom loom-serve; do
  if [ ! -x "$prefix/bin/$prog" ]; then bad "make install did not install bin/$prog"; continue; fi
  help=$(env -u LD_LIBRARY_PATH "$prefix/bin/$prog" --help 2>&1)
  case $help in *usage:*) ok "$prog --help";; *) bad "$prog --help printed no usage: $help";; esac
done

$MAKE --no-print-directory -s uninstall PREFIX="$prefix" BUILD="$BUILD" >"$tmp/uninstall.log" 2>&1 ||
  { cat "$tmp/uninstall.log" >&2; bad "make uninstall PREFIX=$prefix"; }
left=$(cd "$prefix" && find . \( -type f -o -type l -o -name '*loom*' \) ! -path ./bin/other-tool ! -path ./lib/pkgconfig/other.pc)
if [ -z "$left" ]; then ok "uninstall removed every installed file"; else bad "left after make uninstall: $(echo "$left" | tr '\n' ' ')"; fi
if [ -f "$prefix/bin/other-tool" ] && [ -f "$prefix/lib/pkgconfig/other.pc" ]; then ok "uninstall kept the other files"
else bad "make uninstall removed files it did not install"; fi

[ "$fails" = 0 ] && echo "install-check: all passed" || echo "install-check: $fails failed"
[ "$fails" = 0 ]
