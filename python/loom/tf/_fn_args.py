"""The argument names a function takes by name, as TF's fn_args reads them
(positional-or-keyword and keyword-only; not *args or **kwargs): what
Estimator passes to an input_fn, a model_fn or a metric_fn. A plain function
or bound method is read from its code object; anything else (a partial, a
callable object, a decorated function with __wrapped__) through
inspect.signature, imported only then (it costs more than the rest of the
package's imports)."""
import types


def fn_args(fn):
    """The names, in order; [] when fn's signature cannot be read."""
    f, skip = fn, 0
    if isinstance(f, types.MethodType):
        f, skip = f.__func__, 1
    if isinstance(f, types.FunctionType) and not hasattr(f, "__wrapped__"):
        code = f.__code__
        return list(code.co_varnames[max(code.co_posonlyargcount, skip):code.co_argcount + code.co_kwonlyargcount])
    import inspect
    try:
        return [n for n, p in inspect.signature(fn).parameters.items()
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    except (TypeError, ValueError):
        return []
