#!/usr/bin/env python3
"""Writes docs/tf-surface.md: the TF 2.15 symbols loom.tf provides, walked
from the package itself (every namespace of `import loom.tf as tf`, each
class with its public methods and properties, each signature with TF's
argument names and defaults), and the alternatives python/loom/tf/_surface.py
names for what it does not provide.

  scripts/gen_tf_surface.py           write the page
  scripts/gen_tf_surface.py --check   exit 1 when the committed page differs
Needs loom importable (PYTHONPATH=python, LOOM_LIBRARY=build/libloom.so).
"""
import inspect
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
OUT = os.path.join(ROOT, "docs", "tf-surface.md")

import loom.tf as tf  # noqa: E402
from loom.tf import _surface  # noqa: E402

HEADER = """# loom.tf: the TF 2.15 surface it provides

`import loom.tf as tf` gives a TF 2.15 Estimator program the symbols below, with TF's
names, arguments and defaults ([python.md](python.md#tf-215-estimator-programs-loomtf) describes
how they behave). Any other `tf.` symbol raises `NotImplementedError` naming it and what to use
instead, where the program uses it. This page is generated from the code by
`scripts/gen_tf_surface.py` (`python/tests/test_tf_surface.py` checks that it is up to date).
"""


def _ours(obj):
    mod = getattr(obj, "__module__", None) or ""
    return mod.startswith("loom") and mod != "loom.tf._surface"


def _in_tf(v):
    """loom.tf's own (not loom's native API imported into a module)."""
    mod = getattr(v, "__module__", None) or type(v).__module__
    return mod.startswith("loom.tf")


def _default(v):
    if v is inspect.Parameter.empty:
        return None
    r = getattr(v, "__name__", None) if callable(v) and not isinstance(v, type) else None
    r = r or repr(v)
    return "<default>" if " at 0x" in r else r


def _sig(obj):
    target = obj
    if isinstance(obj, type):
        target = obj.__init__
        if target is object.__init__:
            target = obj.__new__  # a namedtuple
            if target is object.__new__:
                return "()"
    elif not inspect.isroutine(obj) and callable(obj):
        target = type(obj).__call__
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return "(...)"
    parts = []
    star = False
    for p in sig.parameters.values():
        if p.name in ("self", "cls", "_cls"):
            continue
        if p.kind == p.VAR_POSITIONAL:
            parts.append("*" + p.name)
            star = True
            continue
        if p.kind == p.VAR_KEYWORD:
            parts.append("**" + p.name)
            continue
        if p.kind == p.KEYWORD_ONLY and not star:
            parts.append("*")
            star = True
        d = _default(p.default)
        parts.append(p.name if d is None else "%s=%s" % (p.name, d))
    return "(%s)" % ", ".join(parts)


def _names(obj):
    if isinstance(obj, types.ModuleType) and hasattr(obj, "__all__") and not isinstance(obj, _surface.Namespace):
        return list(obj.__all__) + [n for n in vars(obj) if not n.startswith("_") and n not in obj.__all__
                                    and isinstance(vars(obj)[n], types.ModuleType)
                                    and vars(obj)[n].__name__.startswith("loom.tf")]
    names = list(vars(obj))
    if not isinstance(obj, types.ModuleType):
        names += list(vars(type(obj)))
    return [n for n in names if not n.startswith("_")]


def _is_ns(v):
    if isinstance(v, types.ModuleType):
        return v.__name__.startswith("loom.tf")
    return not callable(v) and not isinstance(v, (int, float, str, bytes, tuple, list, dict, type(None))) \
        and type(v).__module__.startswith("loom.tf") and not isinstance(v, tf.DType)


def _members(cls):
    out = []
    for n in sorted(dir(cls)):
        if n.startswith("_"):
            continue
        v = inspect.getattr_static(cls, n)
        f = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
        if not (getattr(f, "__module__", "") or "").startswith("loom"):
            continue
        owner = (getattr(f, "__qualname__", "") or "").split(".")[0]
        if owner == "SessionRunHook" and cls.__name__ != "SessionRunHook":
            continue  # a hook's lifecycle methods are SessionRunHook's
        if isinstance(v, property):
            out.append("`%s`" % n)
        elif inspect.isfunction(f):
            out.append("`%s%s`" % (n, _sig(f)))
    return out


def walk(root):
    """Breadth first, so a namespace is listed under its shortest path
    (tf.estimator before tf.compat.v1.estimator)."""
    seen, sections, queue = {id(root): "tf"}, [], [("tf", root)]
    while queue:
        path, obj = queue.pop(0)
        lines, consts = [], []
        for name in sorted(set(_names(obj))):
            try:
                v = getattr(obj, name)
            except (NotImplementedError, AttributeError):
                continue
            full = "%s.%s" % (path, name)
            if full in _surface.INTERNAL_NAMES:
                continue
            if isinstance(v, types.ModuleType) and not isinstance(v, _surface.Namespace) and \
                    v.__name__.rsplit(".", 1)[-1] in _surface.INTERNAL_MODULES:
                continue
            if _is_ns(v):
                if id(v) in seen:
                    lines.append("- `%s`: the same as `%s`" % (name, seen[id(v)]))
                else:
                    seen[id(v)] = full
                    queue.append((full, v))
                continue
            if isinstance(v, (int, float, str, tf.DType)):
                consts.append(name)
                continue
            if isinstance(v, type):
                if not _ours(v) or not _in_tf(v):
                    continue
                line = "- `%s%s`" % (name, _sig(v))
                mem = _members(v)
                if mem:
                    line += ": " + ", ".join(mem)
                lines.append(line)
            elif callable(v) and (_ours(v) or type(v).__module__.startswith("loom.tf")) and _in_tf(v):
                lines.append("- `%s%s`" % (name, _sig(v)))
        if consts:
            lines.append("- constants: " + ", ".join("`%s`" % c for c in consts))
        sections.append((path, lines))
    return sorted(sections)


def render():
    sections = walk(tf)
    out = [HEADER]
    for path, lines in sections:
        if not lines:
            continue
        out.append("## `%s`\n" % path)
        out.extend(lines)
        out.append("")
    out.append("## Not provided: what to use instead\n")
    for k, v in sorted(_surface.ALTERNATIVES.items()):
        out.append("- `tf.%s`: %s" % (k, v))
    out.append("")
    return "\n".join(out)


def main():
    text = render()
    if "--check" in sys.argv[1:]:
        try:
            old = open(OUT).read()
        except OSError:
            old = None
        if old != text:
            print("docs/tf-surface.md is out of date: run scripts/gen_tf_surface.py", file=sys.stderr)
            return 1
        return 0
    with open(OUT, "w") as f:
        f.write(text)
    print("wrote", OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
