"""SessionRunHooks for train / evaluate / predict (hooks=[...]) and
EstimatorSpec's training/evaluation/prediction hooks.

A Python tf.estimator.SessionRunHook subclass runs inside loom's C loop
(loom_hook_new): begin() (tf.compat.v1.train.get_global_step() and
get_default_graph() see the loop's graph), after_create_session(session,
coord), before_run(run_context) returning SessionRunArgs whose fetches (a
tensor, a graph name such as "loss" or "dense/kernel:0", or a list / tuple /
dict of them) are run with the step, after_run(run_context, run_values)
with run_values.results in the fetches' structure as numpy values, end(session).
run_context.request_stop() ends the loop after the step. An exception a hook
raises ends the call and surfaces unchanged.

The standard hooks are loom's C hooks where C has them (StopAtStepHook,
CheckpointSaverHook, SummarySaverHook, StepCounterHook, ProfilerHook,
GlobalStepWaiterHook, NanTensorHook, FinalOpsHook); LoggingTensorHook
(tensors by graph name, every_n_iter / every_n_secs / at_end, formatter)
is a Python hook logging through Python's "tensorflow" logger at INFO, as TF's."""
import collections
import ctypes as C
import logging
import time

from .. import _lib as L
from .. import _lib_keras as K
from .._lib import lib
from .. import Graph, Output, _Status, _b, _from_tensor, Session as _Session
from . import ops as _ops

log = logging.getLogger("tensorflow")


class SessionRunArgs(collections.namedtuple("SessionRunArgs", ["fetches", "feed_dict", "options"])):
    def __new__(cls, fetches, feed_dict=None, options=None):
        return super().__new__(cls, fetches, feed_dict, options)


class SessionRunValues(collections.namedtuple("SessionRunValues", ["results", "options", "run_metadata"])):
    pass


class SessionRunContext:
    """tf.estimator.SessionRunContext of one step."""

    def __init__(self, ctx, original_args, session):
        self._ctx, self._original_args, self._session = ctx, original_args, session

    @property
    def original_args(self):
        return self._original_args

    @property
    def session(self):
        return self._session

    @property
    def stop_requested(self):
        return bool(K.lib.loom_hook_context_stop_requested(self._ctx))

    def request_stop(self):
        K.lib.loom_hook_context_request_stop(self._ctx)


class SessionRunHook:
    """tf.estimator.SessionRunHook: override any of these."""

    def begin(self):
        pass

    def after_create_session(self, session, coord):
        pass

    def before_run(self, run_context):
        return None

    def after_run(self, run_context, run_values):
        pass

    def end(self, session):
        pass


class _BorrowedSession(_Session):
    """The loop's session as hooks see it: run(fetches) on tensors or graph
    names (the session belongs to the loop)."""

    def __init__(self, p, graph):
        self.p, self.graph = p, graph

    def close(self):
        pass

    __del__ = close

    def run(self, fetches=None, feed_dict=None, targets=None, options=None, run_metadata=None):
        flat, rebuild = _flatten(fetches, self.graph)
        return rebuild([_scalar(v) for v in super().run(flat, feed_dict, targets)])


def _resolve(f, graph, cache=None):
    if isinstance(f, Output):
        return f
    if isinstance(f, _ops._GlobalStep):
        return _ops.get_global_step(graph)
    if isinstance(f, str):
        if cache is not None and f in cache:
            return cache[f]
        try:
            out = graph.get(f)
            if cache is not None:
                cache[f] = out
            return out
        except KeyError:
            raise ValueError("SessionRunArgs: the graph has no tensor %r (hooks name tensors by their graph names, "
                             "e.g. \"loss\" or \"dense/kernel:0\")" % f) from None
    if hasattr(f, "_metric"):  # a tf.compat.v1.metrics (value, update_op) pair
        return f[0]
    raise TypeError("SessionRunArgs: fetch %r is not a tensor or a tensor's name" % (f,))


def _flatten(fetches, graph, cache=None):
    """([Output], rebuild(values) -> the fetches' structure); cache: name -> Output."""
    if fetches is None:
        return [], lambda v: None
    if isinstance(fetches, dict):
        keys = list(fetches)
        outs = [_resolve(fetches[k], graph, cache) for k in keys]
        return outs, lambda v: dict(zip(keys, v))
    if isinstance(fetches, (list, tuple)) and not hasattr(fetches, "_metric"):
        outs = [_resolve(f, graph, cache) for f in fetches]
        kind = type(fetches)
        return outs, lambda v: kind(v) if kind in (list, tuple) else kind(*v)
    return [_resolve(fetches, graph, cache)], lambda v: v[0]


def _scalar(v):
    """A 0-d array as its numpy scalar (what TF's session.run returns)."""
    return v[()] if getattr(v, "ndim", None) == 0 else v


class _PyHook:
    """A Python SessionRunHook as a loom_hook (one per call; the C hook owns
    it through the registry until destroy)."""
    _live = {}

    def __init__(self, hook, owner):
        self.hook, self.owner = hook, owner
        self.graph = None
        self.ops = K.HookOps()
        self._cbs = []
        base = SessionRunHook
        for field, proto, meth, fn in (("begin", K.HOOK_BEGIN, "begin", self._begin),
                                       ("after_create_session", K.HOOK_AFTER_CREATE, "after_create_session",
                                        self._after_create),
                                       ("before_run", K.HOOK_BEFORE_RUN, "before_run", self._before_run),
                                       ("after_run", K.HOOK_AFTER_RUN, "after_run", self._after_run),
                                       ("end", K.HOOK_END, "end", self._end)):
            # a method the subclass does not override costs nothing per step
            mine = getattr(type(hook), meth, None)
            needed = mine is not getattr(base, meth) or field == "begin" or \
                (field == "after_run" and getattr(type(hook), "before_run") is not base.before_run)
            if needed:
                cb = proto(fn)
                self._cbs.append(cb)
                setattr(self.ops, field, cb)
        self._destroy = K.HOOK_DESTROY(self._on_destroy)
        self.ops.destroy = self._destroy
        self.p = K.lib.loom_hook_new(C.byref(self.ops), None, _b(type(hook).__name__))
        if not self.p:
            raise MemoryError("loom_hook_new")
        _PyHook._live[id(self)] = self
        self._fetches, self._rebuild, self._arr = [], None, None
        self._names = {}  # graph names resolved once per loop

    def _fail(self, st, e):
        from .._estimator import _fail
        return _fail(self.owner, st, e)

    def _session(self, s):
        return _BorrowedSession(s, self.graph) if s else None

    def _begin(self, me, g, st):
        try:
            self.graph = Graph(_borrow=g)
            self._names = {}
            _ops._graphs.append(self.graph)
            try:
                self.hook.begin()
            finally:
                _ops._graphs.pop()
            self.graph._check()
            return 0
        except BaseException as e:  # noqa: B902 - must not unwind through C
            return self._fail(st, e)

    def _after_create(self, me, s, st):
        try:
            self.hook.after_create_session(self._session(s), None)
            return 0
        except BaseException as e:  # noqa: B902
            return self._fail(st, e)

    def _before_run(self, me, ctx, args, st):
        try:
            self._ctx = SessionRunContext(ctx, None, None)
            r = self.hook.before_run(self._ctx)
            self._fetches, self._rebuild = [], None
            if r is None:
                return 0
            if not isinstance(r, SessionRunArgs):
                raise TypeError("%s.before_run must return None or a SessionRunArgs, got %s"
                                % (type(self.hook).__name__, type(r).__name__))
            if r.feed_dict:
                raise NotImplementedError("loom.tf: %s.before_run returned SessionRunArgs(feed_dict=...), which is "
                                          "not supported: the training step's inputs come from the input_fn; "
                                          "instead: put the values in the input_fn's features (or a "
                                          "tf.compat.v1.train.piecewise_constant of the global step for a schedule)"
                                          % type(self.hook).__name__)
            self._fetches, self._rebuild = _flatten(r.fetches, self.graph, self._names)
            if self._fetches:
                self._arr = (L.Output * len(self._fetches))(*[f.c for f in self._fetches])
                args.contents.nfetches, args.contents.fetches = len(self._fetches), self._arr
            return 0
        except BaseException as e:  # noqa: B902
            return self._fail(st, e)

    def _after_run(self, me, ctx, results, st):
        try:
            vals = [_scalar(_from_tensor(results[i])) for i in range(len(self._fetches))]
            res = self._rebuild(vals) if self._rebuild else None
            rc = getattr(self, "_ctx", None) or SessionRunContext(ctx, None, None)
            rc._ctx = ctx
            self.hook.after_run(rc, SessionRunValues(res, None, None))
            return 0
        except BaseException as e:  # noqa: B902
            return self._fail(st, e)

    def _end(self, me, s, st):
        try:
            self.hook.end(self._session(s))
            return 0
        except BaseException as e:  # noqa: B902
            return self._fail(st, e)

    def _on_destroy(self, me):
        _PyHook._live.pop(id(self), None)


class _CHook(SessionRunHook):
    """A standard hook that is one of loom's C hooks (made per call)."""

    def _c(self):
        raise NotImplementedError

    @staticmethod
    def _made(h, st):
        if not h:
            try:
                st.raise_if()
            except Exception as e:
                raise ValueError(str(e)) from None
        return h


def _every(every_n_steps, every_n_secs, what):
    if (every_n_steps is None) == (every_n_secs is None):
        raise ValueError("%s: exactly one of every_n_steps and every_n_secs should be provided." % what)
    return int(every_n_steps or 0), float(every_n_secs or 0.0)


class StopAtStepHook(_CHook):
    def __init__(self, num_steps=None, last_step=None):
        if num_steps is None and last_step is None:
            raise ValueError("One of num_steps or last_step must be specified.")
        if num_steps is not None and last_step is not None:
            raise ValueError("Only one of num_steps or last_step can be specified.")
        self.num_steps, self.last_step = num_steps, last_step

    def _c(self):
        st = _Status()
        return self._made(lib.loom_stop_at_step_hook(self.num_steps or 0, self.last_step or 0, st.p), st)


class CheckpointSaverHook(_CHook):
    def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None, checkpoint_basename="model.ckpt",
                 scaffold=None, listeners=None, save_graph_def=True):
        for k, v in (("saver", saver), ("scaffold", scaffold)):
            if v:
                raise NotImplementedError("loom.tf: CheckpointSaverHook(%s=...) is not supported" % k)
        if checkpoint_basename != "model.ckpt":
            raise NotImplementedError("loom.tf: CheckpointSaverHook(checkpoint_basename=%r): model.ckpt only"
                                      % checkpoint_basename)
        from .estimator import _extras
        self._listeners = _extras.check_listeners(listeners, "listeners")
        self.checkpoint_dir = str(checkpoint_dir)
        self.steps, self.secs = _every(save_steps, save_secs, "CheckpointSaverHook")

    def _c(self):
        from .estimator import _extras
        ls = _extras.Listeners(self._listeners, getattr(self, "_owner", None))
        st = _Status()
        h = self._made(K.lib.loom_checkpoint_saver_hook(_b(self.checkpoint_dir), self.secs, self.steps, None, 5,
                                                        None, ls.n, C.cast(ls.arr, C.c_void_p) if ls.n else None, None,
                                                        st.p), st)
        self._ls = ls  # the C listeners live as long as the hook (Hooks keeps it for the call)
        return h


class _WriterHook(_CHook):
    def _writer(self, output_dir):
        st = _Status()
        w = K.lib.loom_event_writer_new(_b(str(output_dir)), None, st.p)
        return self._made(w, st)


class SummarySaverHook(_WriterHook):
    def __init__(self, save_steps=None, save_secs=None, output_dir=None, summary_writer=None, scaffold=None,
                 summary_op=None):
        for k, v in (("summary_writer", summary_writer), ("scaffold", scaffold), ("summary_op", summary_op)):
            if v is not None:
                raise NotImplementedError("loom.tf: SummarySaverHook(%s=...) is not supported (it writes all the "
                                          "graph's summaries to output_dir)" % k)
        if output_dir is None:
            raise ValueError("SummarySaverHook: output_dir is required")
        self.output_dir = output_dir
        self.steps, self.secs = _every(save_steps, save_secs, "SummarySaverHook")

    def _c(self):
        w = self._writer(self.output_dir)
        st = _Status()
        h = K.lib.loom_summary_saver_hook(self.steps, self.secs, w, st.p)
        return self._made(h, st), (lambda: K.lib.loom_event_writer_free(w))


class StepCounterHook(_WriterHook):
    def __init__(self, every_n_steps=100, every_n_secs=None, output_dir=None, summary_writer=None):
        if summary_writer is not None:
            raise NotImplementedError("loom.tf: StepCounterHook(summary_writer=...): give output_dir")
        if every_n_secs is not None:
            every_n_steps = None
        self.steps, self.secs = _every(every_n_steps, every_n_secs, "StepCounterHook")
        self.output_dir = output_dir

    def _c(self):
        w = self._writer(self.output_dir) if self.output_dir else None
        st = _Status()
        h = self._made(K.lib.loom_step_counter_hook(self.steps, self.secs, w, st.p), st)
        return h, (lambda: K.lib.loom_event_writer_free(w)) if w else None


class ProfilerHook(_CHook):
    def __init__(self, save_steps=None, save_secs=None, output_dir="", show_dataflow=True, show_memory=False):
        self.steps, self.secs = _every(save_steps, save_secs, "ProfilerHook")
        self.output_dir = str(output_dir)

    def _c(self):
        st = _Status()
        return self._made(K.lib.loom_profiler_hook(self.steps, self.secs, _b(self.output_dir), st.p), st)


class GlobalStepWaiterHook(_CHook):
    def __init__(self, wait_until_step):
        self.wait_until_step = int(wait_until_step)

    def _c(self):
        st = _Status()
        return self._made(K.lib.loom_global_step_waiter_hook(self.wait_until_step, st.p), st)


class NanTensorHook(_CHook):
    def __init__(self, loss_tensor, fail_on_nan_loss=True):
        if not isinstance(loss_tensor, Output):
            raise TypeError("NanTensorHook: loss_tensor must be the model_fn's loss tensor")
        self.loss_tensor, self.fail_on_nan_loss = loss_tensor, bool(fail_on_nan_loss)

    def _c(self):
        st = _Status()
        return self._made(K.lib.loom_nan_tensor_hook(self.loss_tensor.c, int(self.fail_on_nan_loss), st.p), st)


class LoggingTensorHook(SessionRunHook):
    """Logs "tag = value, ... (x.xxx sec)" every_n_iter local steps or
    every_n_secs, and at the end (at_end); tensors by graph name or tensor,
    a list (tags = names) or a dict {tag: tensor}; formatter(dict of tag ->
    numpy value) -> str replaces the default line."""

    def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end=False, formatter=None):
        only_log_at_end = at_end and every_n_iter is None and every_n_secs is None
        if not only_log_at_end and (every_n_iter is None) == (every_n_secs is None):
            raise ValueError("either at_end and/or exactly one of every_n_iter and every_n_secs must be provided.")
        if every_n_iter is not None and every_n_iter <= 0:
            raise ValueError("invalid every_n_iter=%s." % every_n_iter)
        if not isinstance(tensors, dict):
            self._tag_order = [t if isinstance(t, str) else t.name for t in tensors]
            tensors = {tag: t for tag, t in zip(self._tag_order, tensors)}
        else:
            self._tag_order = sorted(tensors.keys())
        self._tensors = tensors
        self._formatter, self._log_at_end = formatter, at_end
        self._every_n_iter, self._every_n_secs = every_n_iter, every_n_secs
        self._only_log_at_end = only_log_at_end

    def begin(self):
        self._iter_count, self._last_time, self._last_values = 0, None, None
        self._current = False

    def _should_trigger(self):
        if self._only_log_at_end:
            return False
        if self._last_time is None:
            return True
        if self._every_n_iter is not None:
            return self._iter_count - self._last_iter >= self._every_n_iter
        return time.time() - self._last_time >= self._every_n_secs

    def before_run(self, run_context):
        self._current = self._should_trigger()
        if self._current or self._log_at_end:
            return SessionRunArgs(dict(self._tensors))
        return None

    def _log(self, values):
        if self._formatter:
            log.info(self._formatter(values))
            return
        now = time.time()
        line = ", ".join("%s = %s" % (tag, values[tag]) for tag in self._tag_order)
        if self._last_time is not None:
            log.info("%s (%.3f sec)", line, now - self._last_time)
        else:
            log.info("%s", line)

    def after_run(self, run_context, run_values):
        if run_values.results is not None:
            self._last_values = run_values.results
        if self._current:
            self._log(run_values.results)
            self._last_time, self._last_iter = time.time(), self._iter_count
        self._iter_count += 1

    def end(self, session):
        if self._log_at_end and self._last_values is not None:
            self._log(self._last_values)


class FeedFnHook(SessionRunHook):
    def __init__(self, feed_fn):
        raise NotImplementedError("loom.tf: FeedFnHook is not supported (feeds come from the input_fn's dataset)")


class Hooks:
    """The C hooks of one call, made from TF hook objects; free() after it."""

    def __init__(self, hooks, owner, where):
        self.ptrs, self._frees, self._py = [], [], []
        try:
            for h in hooks or []:
                self.ptrs.append(self.make(h, owner, where))
        except BaseException:
            self.free()
            raise
        self.arr = (C.c_void_p * max(1, len(self.ptrs)))(*self.ptrs)

    def make(self, h, owner, where):
        """One loom_hook for h (its extra resources noted for free())."""
        if isinstance(h, _CHook):
            h._owner = owner  # what a callback of the hook (a listener) reports its exception to
            self._py.append(h)
            r = h._c()
            if isinstance(r, tuple):
                r, done = r
                if done:
                    self._frees.append(done)
            return r
        if isinstance(h, SessionRunHook) or all(hasattr(h, m) for m in ("begin", "before_run", "after_run")):
            ph = _PyHook(h, owner)
            self._py.append(ph)
            return ph.p
        raise TypeError("%s(hooks=[%r]): a hook must be a tf.estimator.SessionRunHook" % (where, h))

    def set(self, o):
        o.nhooks, o.hooks = len(self.ptrs), C.cast(self.arr, C.c_void_p)

    def free(self):
        for h in self.ptrs:
            lib.loom_hook_free(h)
        self.ptrs = []
        for f in self._frees:
            f()
        self._frees = []


def add_spec_hooks(spec, res, owner):
    """EstimatorSpec's hooks into loom's spec (which takes them over)."""
    slots = (("training_chief_hooks", 1), ("training_hooks", 0), ("evaluation_hooks", 2), ("prediction_hooks", 3))
    for field, slot in slots:
        for h in getattr(res, field) or []:
            hk = Hooks([], owner, "EstimatorSpec")
            p = hk.make(h, owner, "EstimatorSpec(%s)" % field)
            if hk._frees:  # a writer the C hook borrows would outlive nothing here
                hk.free()
                raise NotImplementedError("loom.tf: EstimatorSpec(%s=[%s]): pass it as hooks= to the call"
                                          % (field, type(h).__name__))
            owner._keep.append(hk)
            st = _Status()
            st.raise_if(K.lib.loom_spec_add_hook(spec, slot, p))


def get_default_graph():
    """The graph of the model_fn or hook begin() being called."""
    if not _ops._graphs:
        raise NotImplementedError("loom.tf: tf.compat.v1.get_default_graph() outside a model_fn or a hook's begin() "
                                  "is not supported")
    return _ops._graphs[-1]
