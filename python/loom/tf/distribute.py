"""tf.distribute's strategies an Estimator program hands to
RunConfig(train_distribute=...): MultiWorkerMirroredStrategy (synchronous
all-reduce over TF_CONFIG's chief and worker tasks: loom's collective
strategy) and tf.compat.v1.distribute.experimental.ParameterServerStrategy
(TF_CONFIG's ps tasks serve the variables: loom's parameter-server
strategy; TF 2's tf.distribute.ParameterServerStrategy, which TF's Estimator
does not take, is not provided). tf.estimator.train_and_evaluate then runs the task's role
through that strategy (docs/distributed.md); without a TF_CONFIG cluster
the program trains alone, as TF's single-worker strategy does. A strategy
object here is a choice of loom's strategy, not TF's machinery: scope(),
run() and the other methods of tf.distribute.Strategy raise
NotImplementedError (loom's Keras Sequential trains in one process)."""
import json
import os

from ._surface import Namespace, missing

# loom_distribute (loom_estimator.h)
_LOCAL, _PARAMETER_SERVER, _COLLECTIVE = 1, 2, 3


def _cluster():
    try:
        return json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster") or {}
    except ValueError:
        return {}  # RunConfig reports a bad TF_CONFIG


class _Strategy:
    _kind = None
    _tf_name = None

    def __getattr__(self, name):
        raise missing("distribute.%s." % self._tf_name, name)

    @property
    def _loom_distribute(self):
        """The loom_distribute value RunConfig gives the estimator."""
        return self._kind if _cluster() else _LOCAL


class MultiWorkerMirroredStrategy(_Strategy):
    """tf.distribute.MultiWorkerMirroredStrategy: loom's collective strategy
    (MPI under mpirun / srun, else Gloo at the chief's TF_CONFIG address)."""
    _kind, _tf_name = _COLLECTIVE, "MultiWorkerMirroredStrategy"

    def __init__(self, cluster_resolver=None, communication_options=None, communication=None):
        if cluster_resolver is not None:
            raise NotImplementedError("loom.tf: %s(cluster_resolver=...) is not supported: the cluster comes from "
                                      "TF_CONFIG" % self._tf_name)
        self._options = (communication_options, communication)  # loom chooses MPI / Gloo / NCCL itself

    @property
    def num_replicas_in_sync(self):
        c = _cluster()
        return max(1, len(c.get("chief", [])) + len(c.get("worker", [])))


class _ParameterServerStrategy(_Strategy):
    """tf.compat.v1.distribute.experimental.ParameterServerStrategy: loom's
    parameter-server strategy (TF_CONFIG must name ps tasks)."""
    _kind, _tf_name = _PARAMETER_SERVER, "experimental.ParameterServerStrategy"

    def __init__(self, cluster_resolver=None):
        if cluster_resolver is not None:
            raise NotImplementedError("loom.tf: ParameterServerStrategy(cluster_resolver=...) is not supported: the "
                                      "cluster comes from TF_CONFIG")

    @property
    def num_replicas_in_sync(self):
        return 1  # TF's between-graph replication: each worker's step is its own


experimental = Namespace("distribute.experimental", MultiWorkerMirroredStrategy=MultiWorkerMirroredStrategy)
_ParameterServerStrategy.__name__ = _ParameterServerStrategy.__qualname__ = "ParameterServerStrategy"
_v1_experimental = Namespace("compat.v1.distribute.experimental", ParameterServerStrategy=_ParameterServerStrategy,
                            MultiWorkerMirroredStrategy=MultiWorkerMirroredStrategy)


def __getattr__(name):
    raise missing("distribute.", name)
