#!/usr/bin/env python3
"""Prints the circles of files among the object files of each folder given
(e.g. build/distributed): every two files where each calls a function the
other defines ("a <-> b"), and every longer loop of files that call one
another ("loop: a b c", a strongly connected set of three or more). Prints
nothing when there is none. Reads the symbols with nm.

Usage: scripts/file_calls.py build/distributed [build/estimator ...]"""
import collections
import glob
import os
import subprocess
import sys


def calls_of(folder):
    """{object: set of objects in the folder whose functions it calls}."""
    defined, undefined = {}, collections.defaultdict(set)
    objs = sorted(glob.glob(os.path.join(folder, '*.o')))
    for o in objs:
        out = subprocess.run(['nm', o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in ('T', 'W'):
                defined[f[2]] = o
            elif len(f) == 2 and f[0] == 'U':
                undefined[o].add(f[1])
    g = {o: set() for o in objs}
    for o, syms in undefined.items():
        g[o] |= {defined[s] for s in syms if s in defined and defined[s] != o}
    return g


def loops(g):
    """The strongly connected sets of more than one file (Tarjan, iterative)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], 0
    for root in g:
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main(folders):
    for folder in folders:
        g = calls_of(folder)
        for a in sorted(g):
            for b in sorted(g[a]):
                if a < b and a in g[b]:
                    print(f'{a} <-> {b}')
        for comp in loops(g):
            if len(comp) > 2:
                print('loop:', ' '.join(comp))


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
