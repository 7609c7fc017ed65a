#!/usr/bin/env python3
"""Runs the code blocks of the documentation that are marked runnable.

    scripts/doc_test.py [FILE.md ...]    (default: README.md and docs/*.md)
    scripts/doc_test.py --self-test      (a broken block of each kind must fail)

A block is runnable when the line right before its opening fence is a marker:

    <!-- doctest: c -->        a whole C program: compiled against build/libloom.a, run, exit 0
    <!-- doctest: sh -->       a bash script (-e -o pipefail), exit 0
    <!-- doctest: job -->      a job file for build/loom: `build/loom train` runs it for 2 steps
                               (`steps=N` after the kind changes that), model_dir replaced
    <!-- doctest: python -->   a Python script run by the Python package's virtualenv
                               (scripts/peer_venv.sh py); skipped when that cannot be made

`file=NAME` after the kind also saves the block as NAME, for the blocks after it. The blocks
of one markdown file run in file order in one temporary directory, so a block can use what an
earlier one wrote. That directory holds a link to every top-level entry of the repository
(build/, examples/, tests/, ...), so a block reads as if run from the repository root and a
job file's relative paths (relative to the job file) are relative to the repository root.
Environment: LOOM_ROOT (the repository), LOOM_BUILD (its build directory), LOOM_LIBRARY
(build/libloom.so), PYTHONPATH (python/). Each block has a deadline (DOC_TEST_TIMEOUT
seconds, default 120). Prints one PASS/FAIL/SKIP line per block with file:line (and the
block's output when it fails, or always with DOC_TEST_VERBOSE=1); exits 1 when
a block fails, a marker is malformed, a relative link names a missing page or heading, or no
runnable block was found.
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.environ.get("LOOM_ROOT") or os.path.join(os.path.dirname(__file__), ".."))
BUILD = os.path.abspath(os.environ.get("LOOM_BUILD") or os.path.join(ROOT, "build"))
CC = os.environ.get("CC") or "cc"
LDLIBS = os.environ.get("DOC_LDLIBS") or "-lopenblas -lcjson -lprotobuf-c -luv -lcrypto -lpthread -lm -lz"
TIMEOUT = float(os.environ.get("DOC_TEST_TIMEOUT") or 120)
VERBOSE = bool(os.environ.get("DOC_TEST_VERBOSE"))
KINDS = ("c", "sh", "job", "python")
MARKER = re.compile(r"^\s*<!--\s*doctest:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^\s*(```+|~~~+)")


class Block:
    def __init__(self, path, line, kind, args, text):
        self.path, self.line, self.kind, self.args, self.text = path, line, kind, args, text

    def where(self):
        return "%s:%d" % (os.path.relpath(self.path, ROOT) if self.path.startswith(ROOT) else self.path, self.line)


def parse(path):
    """The marked blocks of one file and the marker errors (where, message)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks, errors = [], []
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        where = "%s:%d" % (os.path.relpath(path, ROOT) if path.startswith(ROOT) else path, i + 1)
        words = m.group(1).split()
        kind = words[0] if words else ""
        args = {}
        bad = None
        for w in words[1:]:
            k, eq, v = w.partition("=")
            if not eq or k not in ("file", "steps"):
                bad = "unknown marker argument '%s' (known: file=NAME, steps=N)" % w
            elif k == "file" and (not re.fullmatch(r"[\w.-]+", v) or os.path.lexists(os.path.join(ROOT, v))):
                bad = "file=%s: give a plain name that is not a top-level entry of the repository" % v
            elif k == "steps" and not v.isdigit():
                bad = "steps=%s: give a positive number of steps" % v
            args[k] = v
        if kind not in KINDS:
            bad = "unknown doctest kind '%s' (one of: %s)" % (kind, ", ".join(KINDS))
        f = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not f:
            bad = bad or "the marker is not followed by a code fence on the next line"
        if bad:
            errors.append((where, bad))
            i += 1
            continue
        fence = f.group(1)
        body, j = [], i + 2
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j])
            j += 1
        if j == len(lines):
            errors.append((where, "the code fence opened on line %d is never closed" % (i + 2)))
            break
        blocks.append(Block(path, i + 2, kind, args, "\n".join(body) + "\n"))
        i = j + 1
    return blocks, errors


def slug(heading):
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def link_errors(path):
    """(where, message) for each relative link of the page whose file or #anchor does not exist."""
    errors, anchors = [], {}

    def anchors_of(p):
        if p not in anchors:
            with open(p, encoding="utf-8") as f:
                anchors[p] = {slug(h) for h in re.findall(r"(?m)^#+ (.*)$", f.read())}
        return anchors[p]

    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    fenced = False
    for n, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
        if fenced:
            continue
        prose = re.sub(r"`[^`]*`", "", line)  # code spans hold calls, not links: f(x)[i](**kw)
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", prose):
            if re.match(r"[a-z]+:", target):
                continue  # http:, mailto: ...
            dest = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
            where = "%s:%d" % (os.path.relpath(path, ROOT) if path.startswith(ROOT) else path, n)
            if not os.path.exists(dest):
                errors.append((where, "link to '%s': no such file" % target))
            elif anchor and dest.endswith(".md") and anchor not in anchors_of(dest):
                errors.append((where, "link to '%s#%s': no such heading" % (target, anchor)))
    return errors


def workspace():
    ws = tempfile.mkdtemp(prefix="loom_doctest_")
    for name in os.listdir(ROOT):
        if name not in (".git", "build"):
            os.symlink(os.path.join(ROOT, name), os.path.join(ws, name))
    os.symlink(BUILD, os.path.join(ws, "build"))
    return ws


_python = []


def python():
    """The Python with numpy the python blocks run under, or None (with the reason)."""
    if not _python:
        exe = os.environ.get("DOC_TEST_PYTHON")
        why = None
        if not exe:
            try:  # creates the virtualenv from PyPI once (make test-py has usually made it)
                r = subprocess.run(["bash", os.path.join(ROOT, "scripts/peer_venv.sh"), "py"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900)
                exe = r.stdout.strip() if r.returncode == 0 else None
                last = (r.stderr.strip().splitlines() or ["failed"])[-1]
            except subprocess.TimeoutExpired:
                exe, last = None, "no answer within 900 s"
            why = None if exe else "no Python virtualenv with numpy (scripts/peer_venv.sh py: %s)" % last
        _python.append((exe, why))
    return _python[0]


def run_block(b, ws, n, env):
    """(status, detail, output): status PASS, FAIL or SKIP."""
    def run(cmd):
        # Output goes to a file, not a pipe, so that a process the block left behind cannot hold
        # the run open; the block runs in its own process group, which is killed afterwards.
        with tempfile.TemporaryFile(mode="w+", errors="replace") as log:
            p = subprocess.Popen(cmd, cwd=ws, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = p.wait(timeout=TIMEOUT)
                late = ""
            except subprocess.TimeoutExpired:
                rc, late = 124, "\n(deadline: %g s passed)" % TIMEOUT
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
            log.seek(0)
            return rc, log.read() + late

    ext = {"c": ".c", "sh": ".sh", "job": ".json", "python": ".py"}[b.kind]
    name = b.args.get("file") or "block_%d%s" % (n, ext)
    src = os.path.join(ws, name)
    with open(src, "w", encoding="utf-8") as f:
        f.write(b.text)
    if b.kind == "c":
        exe = os.path.join(ws, "block_%d" % n)
        cmd = [CC, "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-I" + os.path.join(ROOT, "include"),
               src, "-o", exe, os.path.join(BUILD, "libloom.a")] + shlex.split(LDLIBS)
        rc, out = run(cmd)
        if rc:
            return "FAIL", "does not compile (%s)" % " ".join(cmd[:2] + ["..."]), out
        rc, out = run([exe])
    elif b.kind == "sh":
        rc, out = run(["bash", "-e", "-o", "pipefail", src])
    elif b.kind == "job":
        steps = b.args.get("steps", "2")
        rc, out = run([os.path.join(BUILD, "loom"), "train", src, "--model-dir", os.path.join(ws, "model_%d" % n),
                       "--steps", steps, "--quiet"])
    else:
        exe, why = python()
        if not exe:
            return "SKIP", why, ""
        rc, out = run([exe, src])
    if rc:
        return "FAIL", "exit status %d" % rc, out
    return "PASS", "", out


def main(paths):
    env = dict(os.environ, LOOM_ROOT=ROOT, LOOM_BUILD=BUILD, LOOM_LIBRARY=os.path.join(BUILD, "libloom.so"),
               PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for path in paths:
        blocks, errors = parse(path)
        errors += link_errors(path)
        for where, msg in errors:
            print("doc-test: FAIL %s: %s" % (where, msg), flush=True)
            counts["FAIL"] += 1
        if not blocks:
            continue
        ws = workspace()
        try:
            for n, b in enumerate(blocks):
                t0 = time.time()
                status, detail, out = run_block(b, ws, n, env)
                counts[status] += 1
                print("doc-test: %s %s (%s, %.1f s)%s" % (status, b.where(), b.kind, time.time() - t0,
                                                        ": " + detail if detail else ""), flush=True)
                if status == "FAIL" or VERBOSE:
                    print("\n".join("    " + t for t in out.rstrip("\n").split("\n")[-40:]), flush=True)
        finally:
            shutil.rmtree(ws, ignore_errors=True)
    total = sum(counts.values())
    print("doc-test: %d passed, %d failed, %d skipped" % (counts["PASS"], counts["FAIL"], counts["SKIP"]))
    if total == 0:
        print("doc-test: no runnable block found in %s" % " ".join(paths))
        return 1
    return 1 if counts["FAIL"] else 0


BROKEN = """# a page with one block that works and broken ones of each kind

<!-- doctest: sh -->
```sh
echo works > out.txt
```

<!-- doctest: sh -->
```sh
test "$(cat out.txt)" = works   # the blocks of a file share a directory
false
```

<!-- doctest: c -->
```c
int main(void) { return undeclared_name; }
```

<!-- doctest: c -->
```c
#include "loom/loom.h"
int main(void) { return loom_status_new() ? 3 : 0; }
```

<!-- doctest: job -->
```json
{"data": {"format": "csv", "train": "no/such/file.csv"}}
```

<!-- doctest: cobol -->
```cobol
```

<!-- doctest: sh -->
not a fence

[a page that is not there](no-such-page.md), [a heading that is not there](#no-such-heading)

<!-- doctest: sh file=README.md -->
```sh
echo this must never replace the repository's README
```
"""
# (status, line of the opening fence or of a bad marker, kind)
EXPECT = [("PASS", 4, "sh"), ("FAIL", 9, "sh"), ("FAIL", 15, "c"), ("FAIL", 20, "c"), ("FAIL", 26, "job"),
          ("FAIL", 30, None), ("FAIL", 34, None), ("FAIL", 37, None), ("FAIL", 37, None), ("FAIL", 39, None)]


def self_test():
    """The runner on a page with broken blocks must report each of them and exit 1."""
    d = tempfile.mkdtemp(prefix="loom_doctest_self_")
    try:
        page = os.path.join(d, "broken.md")
        with open(page, "w") as f:
            f.write(BROKEN)
        r = subprocess.run([sys.executable, os.path.abspath(__file__), page], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=4 * TIMEOUT)
        got = []
        for line in r.stdout.split("\n"):
            m = re.match(r"doc-test: (PASS|FAIL|SKIP) .*?broken\.md:(\d+)(?: \((\w+),)?", line)
            if m:
                got.append((m.group(1), int(m.group(2)), m.group(3)))
        got.sort(key=lambda g: g[1])
        ok = r.returncode == 1 and got == EXPECT
        if ok:
            print("doc-test self-test: PASS (a page of broken blocks: %d of %d reported as FAIL, exit 1)"
                  % (sum(g[0] == "FAIL" for g in got), len(got)))
        else:
            print("doc-test self-test: FAIL (exit %d; expected %s, got %s)" % (r.returncode, EXPECT, got))
            print(r.stdout)
        return 0 if ok else 1
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args == ["--self-test"]:
        sys.exit(self_test())
    if not args:
        docs = os.path.join(ROOT, "docs")
        args = [os.path.join(ROOT, "README.md")] + sorted(
            os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    sys.exit(main([os.path.abspath(a) for a in args]))
