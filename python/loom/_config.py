"""loom.RunConfig: an Estimator's run configuration (loom_run_config), with
TF 2.15's arguments and defaults (loom.tf.estimator.RunConfig is this
class); the cluster properties (task_type, task_id, is_chief,
num_ps_replicas, num_worker_replicas) come from the TF_CONFIG environment
variable through loom_tf_config_parse, by TF's rules."""
import os

from ._lib import lib
from . import _Status, _b, LoomError

_USE_DEFAULT = object()


def _cluster(tf_config):
    """(task_type, task_id, is_chief, num_ps, num_workers, global_id, master,
    cluster dict) of a TF_CONFIG JSON string ("" = local)."""
    st = _Status()
    c = lib.loom_tf_config_parse(_b(tf_config or "{}"), st.p)
    if not c:
        try:
            st.raise_if()
        except LoomError as e:
            raise ValueError("TF_CONFIG: %s" % e) from None
    try:
        import json  # here: only TF_CONFIG and exports read JSON
        cluster = (json.loads(tf_config).get("cluster") or {}) if tf_config else {}
        return (lib.loom_tf_config_task_type(c).decode(), lib.loom_tf_config_task_id(c),
                bool(lib.loom_tf_config_is_chief(c)), lib.loom_tf_config_num_ps_replicas(c),
                lib.loom_tf_config_num_worker_replicas(c), lib.loom_tf_config_global_id(c),
                (lib.loom_tf_config_master(c) or b"").decode(), cluster)
    finally:
        lib.loom_tf_config_free(c)


# The session threads of a RunConfig without a session_config's count (0: loom's choice); loom.tf's
# tf.config.threading.set_intra_op_parallelism_threads sets it, as TF's does for the sessions made after.
DEFAULT_THREADS = [0]


class RunConfig:
    """Where and how an Estimator runs: model_dir, tf_random_seed (the graph
    seed), checkpoint cadence (save_checkpoints_steps or
    save_checkpoints_secs, default every 600 s), keep_checkpoint_max,
    summaries and step logging. Read-only properties; replace(**kw) gives a
    changed copy. An Estimator takes it as config=."""

    def __init__(self, model_dir=None, tf_random_seed=None, save_summary_steps=100,
                 save_checkpoints_steps=_USE_DEFAULT, save_checkpoints_secs=_USE_DEFAULT, session_config=None,
                 keep_checkpoint_max=5, keep_checkpoint_every_n_hours=10000, log_step_count_steps=100,
                 train_distribute=None, device_fn=None, protocol=None, eval_distribute=None,
                 experimental_distribute=None, experimental_max_worker_delay_secs=None,
                 session_creation_timeout_secs=7200, checkpoint_save_graph_def=True):
        threads = getattr(session_config, "intra_op_parallelism_threads", None)
        if session_config is not None and not isinstance(threads, int):
            raise TypeError("RunConfig(session_config=%r): give a tf.compat.v1.ConfigProto (loom.tf) or an object "
                            "with intra_op_parallelism_threads" % (session_config,))
        self._session_config, self._num_threads = session_config, threads or DEFAULT_THREADS[0]
        if train_distribute is not None and not hasattr(train_distribute, "_loom_distribute"):
            raise NotImplementedError("loom: RunConfig(train_distribute=%r) is not supported: give "
                                      "tf.distribute.MultiWorkerMirroredStrategy() or "
                                      "tf.compat.v1.distribute.experimental.ParameterServerStrategy() (loom.tf), or "
                                      "leave it unset (TF_CONFIG decides)" % (train_distribute,))
        self._train_distribute = train_distribute
        for arg, v in (("device_fn", device_fn), ("eval_distribute", eval_distribute),
                       ("experimental_distribute", experimental_distribute)):
            if v is not None:
                raise NotImplementedError("loom: RunConfig(%s=...) is not supported (distribution comes from "
                                          "TF_CONFIG)" % arg)
        if save_checkpoints_steps is _USE_DEFAULT and save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_steps, save_checkpoints_secs = None, 600
        elif save_checkpoints_steps is _USE_DEFAULT:
            save_checkpoints_steps = None
        elif save_checkpoints_secs is _USE_DEFAULT:
            save_checkpoints_secs = None
        if save_checkpoints_steps is not None and save_checkpoints_secs is not None:
            raise ValueError("RunConfig: save_checkpoints_steps and save_checkpoints_secs cannot both be set")
        if log_step_count_steps is None or log_step_count_steps <= 0:
            raise ValueError("RunConfig: log_step_count_steps must be > 0, got %r" % (log_step_count_steps,))
        self._model_dir = os.fspath(model_dir) if model_dir is not None else None
        self._tf_random_seed = tf_random_seed
        self._save_summary_steps = save_summary_steps
        self._save_checkpoints_steps = save_checkpoints_steps
        self._save_checkpoints_secs = save_checkpoints_secs
        self._keep_checkpoint_max = keep_checkpoint_max
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._log_step_count_steps = log_step_count_steps
        self._session_creation_timeout_secs = session_creation_timeout_secs
        self._protocol = protocol
        tf_config = os.environ.get("TF_CONFIG", "")
        (self._task_type, self._task_id, self._is_chief, self._num_ps_replicas, self._num_worker_replicas,
         self._global_id_in_cluster, self._master, self._cluster_spec) = _cluster(tf_config)
        if self._model_dir is None and tf_config:
            import json  # here: only TF_CONFIG and exports read JSON
            self._model_dir = json.loads(tf_config).get("model_dir")

    model_dir = property(lambda s: s._model_dir)
    tf_random_seed = property(lambda s: s._tf_random_seed)
    save_summary_steps = property(lambda s: s._save_summary_steps)
    save_checkpoints_steps = property(lambda s: s._save_checkpoints_steps)
    save_checkpoints_secs = property(lambda s: s._save_checkpoints_secs)
    keep_checkpoint_max = property(lambda s: s._keep_checkpoint_max)
    keep_checkpoint_every_n_hours = property(lambda s: s._keep_checkpoint_every_n_hours)
    log_step_count_steps = property(lambda s: s._log_step_count_steps)
    session_creation_timeout_secs = property(lambda s: s._session_creation_timeout_secs)
    task_type = property(lambda s: s._task_type)
    task_id = property(lambda s: s._task_id)
    is_chief = property(lambda s: s._is_chief)
    num_ps_replicas = property(lambda s: s._num_ps_replicas)
    num_worker_replicas = property(lambda s: s._num_worker_replicas)
    global_id_in_cluster = property(lambda s: s._global_id_in_cluster)
    master = property(lambda s: s._master)
    cluster_spec = property(lambda s: dict(s._cluster_spec))
    session_config = property(lambda s: s._session_config)
    train_distribute = property(lambda s: s._train_distribute)
    eval_distribute = device_fn = property(lambda s: None)
    protocol = property(lambda s: s._protocol)

    def replace(self, **kwargs):
        """A copy with the given properties replaced (TF's RunConfig.replace)."""
        args = dict(model_dir=self._model_dir, tf_random_seed=self._tf_random_seed,
                    save_summary_steps=self._save_summary_steps,
                    save_checkpoints_steps=self._save_checkpoints_steps,
                    save_checkpoints_secs=self._save_checkpoints_secs,
                    keep_checkpoint_max=self._keep_checkpoint_max,
                    keep_checkpoint_every_n_hours=self._keep_checkpoint_every_n_hours,
                    log_step_count_steps=self._log_step_count_steps,
                    session_creation_timeout_secs=self._session_creation_timeout_secs,
                    session_config=self._session_config, train_distribute=self._train_distribute)
        for k in kwargs:
            if k not in args:
                raise ValueError("RunConfig.replace: %r cannot be replaced (or is not supported by loom)" % k)
        args.update(kwargs)
        if "save_checkpoints_steps" in kwargs and "save_checkpoints_secs" not in kwargs:
            args["save_checkpoints_secs"] = None if kwargs["save_checkpoints_steps"] is not None else \
                args["save_checkpoints_secs"]
        if "save_checkpoints_secs" in kwargs and "save_checkpoints_steps" not in kwargs:
            args["save_checkpoints_steps"] = None if kwargs["save_checkpoints_secs"] is not None else \
                args["save_checkpoints_steps"]
        return type(self)(**args)

    def _distributed(self):
        """True when TF_CONFIG names a cluster of more than this one task."""
        return sum(len(v) if isinstance(v, (list, dict)) else 1 for v in self._cluster_spec.values()) > 1

    def _c(self):
        """The loom_run_config (its model_dir string is kept by self)."""
        c = lib.loom_run_config_default()
        self._model_dir_b = _b(self._model_dir)
        c.model_dir = self._model_dir_b
        if self._tf_random_seed is not None:
            c.has_random_seed, c.tf_random_seed = 1, int(self._tf_random_seed)
        c.save_summary_steps = int(self._save_summary_steps or 0)
        steps, secs = self._save_checkpoints_steps, self._save_checkpoints_secs
        c.save_checkpoints_steps = int(steps) if steps is not None else (0 if secs is None else -1)
        c.save_checkpoints_secs = float(secs) if secs is not None else (0.0 if steps is None else -1.0)
        c.keep_checkpoint_max = int(self._keep_checkpoint_max or 0)
        c.keep_checkpoint_every_n_hours = float(self._keep_checkpoint_every_n_hours)
        c.log_step_count_steps = int(self._log_step_count_steps)
        c.num_threads = int(self._num_threads)  # ConfigProto's intra_op_parallelism_threads, 0: loom's choice
        c.progress_bar = 0
        if self._train_distribute is not None:  # loom.tf's strategy objects: a loom_distribute value
            c.train_distribute = int(self._train_distribute._loom_distribute)
        return c
