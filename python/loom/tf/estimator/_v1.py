"""tf.compat.v1.estimator's canned estimators: TF 2.15 keeps the v1 classes
there with their own signatures: loss_reduction defaults to
tf.compat.v1.losses.Reduction.SUM (the loss of a batch is the sum over its
examples, not the mean as in tf.estimator's), and the DNN models take
input_layer_partitioner, the linear ones partitioner. They are
tf.estimator's classes with those arguments."""
from .. import nn as _nn
from . import (DNNClassifier as _DNNClassifier, DNNRegressor as _DNNRegressor, LinearClassifier as _LinearClassifier,
               LinearRegressor as _LinearRegressor, DNNLinearCombinedClassifier as _CombinedClassifier,
               DNNLinearCombinedRegressor as _CombinedRegressor, BaselineClassifier as _BaselineClassifier,
               BaselineRegressor as _BaselineRegressor)

__all__ = ["DNNClassifier", "DNNRegressor", "LinearClassifier", "LinearRegressor", "DNNLinearCombinedClassifier",
           "DNNLinearCombinedRegressor", "BaselineClassifier", "BaselineRegressor"]

SUM = "weighted_sum"  # tf.compat.v1.losses.Reduction.SUM


def _no_partitioner(cls, arg, v):
    if v is not None:
        raise NotImplementedError("loom.tf: tf.compat.v1.estimator.%s(%s=...) is not supported: loom keeps every "
                                  "variable whole; drop the argument (the model's math is the same, its checkpoint "
                                  "has no /part_N variables)" % (cls, arg))


class DNNClassifier(_DNNClassifier):
    def __init__(self, hidden_units, feature_columns, model_dir=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, optimizer="Adagrad", activation_fn=_nn.relu, dropout=None,
                 input_layer_partitioner=None, config=None, warm_start_from=None, loss_reduction=SUM,
                 batch_norm=False):
        _no_partitioner("DNNClassifier", "input_layer_partitioner", input_layer_partitioner)
        super().__init__(hidden_units, feature_columns, model_dir=model_dir, n_classes=n_classes,
                         weight_column=weight_column, label_vocabulary=label_vocabulary, optimizer=optimizer,
                         activation_fn=activation_fn, dropout=dropout, config=config, warm_start_from=warm_start_from,
                         loss_reduction=loss_reduction, batch_norm=batch_norm)


class DNNRegressor(_DNNRegressor):
    def __init__(self, hidden_units, feature_columns, model_dir=None, label_dimension=1, weight_column=None,
                 optimizer="Adagrad", activation_fn=_nn.relu, dropout=None, input_layer_partitioner=None, config=None,
                 warm_start_from=None, loss_reduction=SUM, batch_norm=False):
        _no_partitioner("DNNRegressor", "input_layer_partitioner", input_layer_partitioner)
        super().__init__(hidden_units, feature_columns, model_dir=model_dir, label_dimension=label_dimension,
                         weight_column=weight_column, optimizer=optimizer, activation_fn=activation_fn,
                         dropout=dropout, config=config, warm_start_from=warm_start_from,
                         loss_reduction=loss_reduction, batch_norm=batch_norm)


class LinearClassifier(_LinearClassifier):
    def __init__(self, feature_columns, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None,
                 optimizer="Ftrl", config=None, partitioner=None, warm_start_from=None, loss_reduction=SUM,
                 sparse_combiner="sum"):
        _no_partitioner("LinearClassifier", "partitioner", partitioner)
        super().__init__(feature_columns, model_dir=model_dir, n_classes=n_classes, weight_column=weight_column,
                         label_vocabulary=label_vocabulary, optimizer=optimizer, config=config,
                         warm_start_from=warm_start_from, loss_reduction=loss_reduction,
                         sparse_combiner=sparse_combiner)


class LinearRegressor(_LinearRegressor):
    def __init__(self, feature_columns, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl",
                 config=None, partitioner=None, warm_start_from=None, loss_reduction=SUM, sparse_combiner="sum"):
        _no_partitioner("LinearRegressor", "partitioner", partitioner)
        super().__init__(feature_columns, model_dir=model_dir, label_dimension=label_dimension,
                         weight_column=weight_column, optimizer=optimizer, config=config,
                         warm_start_from=warm_start_from, loss_reduction=loss_reduction,
                         sparse_combiner=sparse_combiner)


class DNNLinearCombinedClassifier(_CombinedClassifier):
    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=_nn.relu, dnn_dropout=None, n_classes=2, weight_column=None,
                 label_vocabulary=None, input_layer_partitioner=None, config=None, warm_start_from=None,
                 loss_reduction=SUM, batch_norm=False, linear_sparse_combiner="sum"):
        _no_partitioner("DNNLinearCombinedClassifier", "input_layer_partitioner", input_layer_partitioner)
        super().__init__(model_dir=model_dir, linear_feature_columns=linear_feature_columns,
                         linear_optimizer=linear_optimizer, dnn_feature_columns=dnn_feature_columns,
                         dnn_optimizer=dnn_optimizer, dnn_hidden_units=dnn_hidden_units,
                         dnn_activation_fn=dnn_activation_fn, dnn_dropout=dnn_dropout, n_classes=n_classes,
                         weight_column=weight_column, label_vocabulary=label_vocabulary, config=config,
                         warm_start_from=warm_start_from, loss_reduction=loss_reduction, batch_norm=batch_norm,
                         linear_sparse_combiner=linear_sparse_combiner)


class DNNLinearCombinedRegressor(_CombinedRegressor):
    def __init__(self, model_dir=None, linear_feature_columns=None, linear_optimizer="Ftrl",
                 dnn_feature_columns=None, dnn_optimizer="Adagrad", dnn_hidden_units=None,
                 dnn_activation_fn=_nn.relu, dnn_dropout=None, label_dimension=1, weight_column=None,
                 input_layer_partitioner=None, config=None, warm_start_from=None, loss_reduction=SUM,
                 batch_norm=False, linear_sparse_combiner="sum"):
        _no_partitioner("DNNLinearCombinedRegressor", "input_layer_partitioner", input_layer_partitioner)
        super().__init__(model_dir=model_dir, linear_feature_columns=linear_feature_columns,
                         linear_optimizer=linear_optimizer, dnn_feature_columns=dnn_feature_columns,
                         dnn_optimizer=dnn_optimizer, dnn_hidden_units=dnn_hidden_units,
                         dnn_activation_fn=dnn_activation_fn, dnn_dropout=dnn_dropout,
                         label_dimension=label_dimension, weight_column=weight_column, config=config,
                         warm_start_from=warm_start_from, loss_reduction=loss_reduction, batch_norm=batch_norm,
                         linear_sparse_combiner=linear_sparse_combiner)


class BaselineClassifier(_BaselineClassifier):
    def __init__(self, model_dir=None, n_classes=2, weight_column=None, label_vocabulary=None, optimizer="Ftrl",
                 config=None, loss_reduction=SUM):
        super().__init__(model_dir=model_dir, n_classes=n_classes, weight_column=weight_column,
                         label_vocabulary=label_vocabulary, optimizer=optimizer, config=config,
                         loss_reduction=loss_reduction)


class BaselineRegressor(_BaselineRegressor):
    def __init__(self, model_dir=None, label_dimension=1, weight_column=None, optimizer="Ftrl", config=None,
                 loss_reduction=SUM):
        super().__init__(model_dir=model_dir, label_dimension=label_dimension, weight_column=weight_column,
                         optimizer=optimizer, config=config, loss_reduction=loss_reduction)
