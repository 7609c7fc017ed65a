#!/bin/sh
# Prints every pair of object files in one folder of build/ where each calls
# a function the other defines (a circle of two files); prints nothing when
# there is none. Usage: scripts/file_calls.sh build/distributed [build/estimator ...]
set -eu
for dir in "$@"; do
    for o in "$dir"/*.o; do
        nm -g --defined-only "$o" | awk -v f="$o" '$2 ~ /^[TW]$/ { print f, $3 }'
    done > /tmp/file_calls.def.$$
    for o in "$dir"/*.o; do
        nm -u "$o" | awk -v f="$o" '{ print f, $2 }'
    done > /tmp/file_calls.und.$$
    # calls: "caller callee" for every undefined symbol defined by another file
    awk 'NR == FNR { def[$2] = $1; next }
         ($2 in def) && def[$2] != $1 { print $1, def[$2] }' \
        /tmp/file_calls.def.$$ /tmp/file_calls.und.$$ | sort -u > /tmp/file_calls.calls.$$
    awk '{ e[$1 " " $2] = 1 }
         END { for (k in e) { split(k, p, " ");
               if (p[1] < p[2] && ((p[2] " " p[1]) in e)) print p[1] " <-> " p[2] } }' \
        /tmp/file_calls.calls.$$ | sort
    rm -f /tmp/file_calls.def.$$ /tmp/file_calls.und.$$ /tmp/file_calls.calls.$$
done
