"""tf.compat.v1.ConfigProto and GPUOptions, as RunConfig(session_config=...)
takes them. loom keeps the fields that mean the same on its runtime:
intra_op_parallelism_threads sizes the session's thread pool (0: loom's
choice from the CPUs, as TF's); inter_op_parallelism_threads,
allow_soft_placement, log_device_placement, device_filters and
gpu_options.allow_growth change nothing in what a step computes (loom runs a
step's ops in order on one pool, places every op where it has a kernel, and a
worker talks to the parameter servers only). Any other field raises
NotImplementedError naming it."""

_ACCEPTED = {"intra_op_parallelism_threads": 0, "inter_op_parallelism_threads": 0, "allow_soft_placement": False,
             "log_device_placement": False, "device_filters": (), "gpu_options": None, "device_count": None}


class GPUOptions:
    """tf.compat.v1.GPUOptions: allow_growth only (how a GPU's memory is reserved)."""

    def __init__(self, allow_growth=False, **kwargs):
        for k in kwargs:
            raise NotImplementedError("loom.tf: tf.compat.v1.GPUOptions(%s=...) is not supported; instead: "
                                      "GPUOptions(allow_growth=...) or no gpu_options" % k)
        self.allow_growth = bool(allow_growth)


class ConfigProto:
    """tf.compat.v1.ConfigProto for RunConfig(session_config=...)."""

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            if k not in _ACCEPTED:
                raise NotImplementedError(
                    "loom.tf: tf.compat.v1.ConfigProto(%s=...) is not supported; instead: ConfigProto with %s "
                    "(intra_op_parallelism_threads sizes loom's thread pool)" % (k, ", ".join(sorted(_ACCEPTED))))
        for k, default in _ACCEPTED.items():
            setattr(self, k, kwargs.get(k, default))
        n = self.intra_op_parallelism_threads
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError("ConfigProto: intra_op_parallelism_threads must be an int >= 0, got %r" % (n,))
        if not isinstance(self.inter_op_parallelism_threads, int) or self.inter_op_parallelism_threads < 0:
            raise ValueError("ConfigProto: inter_op_parallelism_threads must be an int >= 0, got %r"
                             % (self.inter_op_parallelism_threads,))
        if self.gpu_options is not None and not isinstance(self.gpu_options, GPUOptions):
            raise TypeError("ConfigProto: gpu_options must be a tf.compat.v1.GPUOptions, got %r" % (self.gpu_options,))
        if self.device_count is not None:
            dc = dict(self.device_count)
            if any(k not in ("CPU", "GPU") for k in dc) or dc.get("GPU", 0) != 0:
                raise NotImplementedError("loom.tf: ConfigProto(device_count=%r) is not supported; instead: "
                                          "device_count={'GPU': 0} or none (loom runs on the CPU unless built for "
                                          "CUDA)" % (dc,))
        self.device_filters = list(self.device_filters)
