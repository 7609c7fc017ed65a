#!/usr/bin/env python3
"""Reference values for loom's Heads (tests/test_heads.c) from TF 2.15's
tf.estimator heads (tensorflow-estimator 2.15).

Writes tests/fixtures/heads/heads_fixtures.h: for each case the inputs
(logits, labels, weights), the training loss under SUM_OVER_BATCH_SIZE and
SUM, the eval metric keys (sorted) with their values after one update on
the batch, the prediction keys (sorted) with the prediction values (numbers, or the
strings of "classes" / "all_classes"), the label_vocabulary of the cases
that have one,
and the export output names of the PREDICT spec.

Run: $(scripts/peer_venv.sh tf) scripts/gen_head_fixtures.py
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

Red = tf.losses.Reduction
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "heads",
                   "heads_fixtures.h")

B = 4
W = np.array([[1.0], [2.0], [0.5], [1.5]], np.float32)

CASES = []


def case(name, make, logits, labels, label_dtype, vocab=None):
    CASES.append((name, make, np.array(logits, np.float32), np.array(labels), label_dtype, vocab))


case("binary", lambda red: tf.estimator.BinaryClassHead(weight_column="w", thresholds=(0.3, 0.7),
                                                        loss_reduction=red),
     [[-1.0], [0.5], [2.0], [-0.3]], [[0], [1], [1], [1]], "int64")
case("binary_named", lambda red: tf.estimator.BinaryClassHead(weight_column="w", loss_reduction=red, name="bin"),
     [[-1.0], [0.5], [2.0], [-0.3]], [[0], [1], [1], [1]], "int64")
case("multi_class", lambda red: tf.estimator.MultiClassHead(3, weight_column="w", loss_reduction=red),
     [[1.0, 0.0, -1.0], [0.2, 0.5, 0.1], [-1.0, 2.0, 0.3], [0.0, 0.1, 1.5]], [[0], [2], [1], [2]], "int64")
# label_vocabulary: string labels (the vocabulary entries of the ids below); "classes" / "all_classes" are
# the entries
BIN_VOCAB = ["neg", "pos"]
MC_VOCAB = ["cat", "dog", "bird"]
case("binary_vocab", lambda red: tf.estimator.BinaryClassHead(weight_column="w", label_vocabulary=BIN_VOCAB,
                                                              loss_reduction=red),
     [[-1.0], [0.5], [2.0], [-0.3]], [[0], [1], [1], [1]], "string", BIN_VOCAB)
case("multi_class_vocab", lambda red: tf.estimator.MultiClassHead(3, weight_column="w", label_vocabulary=MC_VOCAB,
                                                                  loss_reduction=red),
     [[1.0, 0.0, -1.0], [0.2, 0.5, 0.1], [-1.0, 2.0, 0.3], [0.0, 0.1, 1.5]], [[0], [2], [1], [2]], "string",
     MC_VOCAB)
case("multi_label", lambda red: tf.estimator.MultiLabelHead(3, weight_column="w", thresholds=(0.5,),
                                                            loss_reduction=red),
     [[1.0, -1.0, 0.5], [-0.2, 0.5, 2.0], [-1.0, 2.0, 0.3], [0.0, -0.1, 1.5]],
     [[1, 0, 1], [0, 1, 1], [0, 1, 0], [1, 0, 0]], "int64")
case("regression", lambda red: tf.estimator.RegressionHead(label_dimension=2, weight_column="w",
                                                           loss_reduction=red),
     [[1.0, 0.5], [-0.5, 2.0], [0.25, 0.0], [3.0, -1.0]], [[0.5, 0.5], [0.0, 1.0], [1.0, -1.0], [2.0, 0.0]],
     "float32")
case("poisson", lambda red: tf.estimator.PoissonRegressionHead(weight_column="w", loss_reduction=red),
     [[0.1], [1.0], [-0.5], [0.7]], [[1.0], [3.0], [0.0], [2.0]], "float32")
case("logistic", lambda red: tf.estimator.LogisticRegressionHead(weight_column="w", loss_reduction=red),
     [[0.1], [1.0], [-0.5], [0.7]], [[0.2], [0.9], [0.0], [1.0]], "float32")

MULTI_LOGITS = np.array([[-1.0, 1.0, 0.0, -1.0], [0.5, 0.2, 0.5, 0.1], [2.0, -1.0, 2.0, 0.3],
                         [-0.3, 0.0, 0.1, 1.5]], np.float32)
MULTI_LABELS = {"b": np.array([[0], [1], [1], [1]], np.int64), "m": np.array([[0], [2], [1], [2]], np.int64)}


def make_multi(red):
    return tf.estimator.MultiHead([tf.estimator.BinaryClassHead(weight_column="w", loss_reduction=red, name="b"),
                                   tf.estimator.MultiClassHead(3, weight_column="w", loss_reduction=red,
                                                               name="m")], head_weights=[1.0, 2.0])


def flat(v):
    v = np.asarray(v)
    return v.reshape(-1)


def eager_values(head, logits, labels):
    features = {"w": tf.constant(W)}
    loss = float(head.loss(labels=labels, logits=logits, features=features).numpy())
    metrics = head.update_metrics(head.metrics(), features, logits, labels)
    mvals = {k: float(m.result().numpy()) for k, m in metrics.items()}
    preds = head.predictions(logits)
    pvals = {}
    for k, v in preds.items():
        k = "/".join(k) if isinstance(k, tuple) else k
        pvals[k] = v.numpy()
    return loss, mvals, pvals


def export_names(head, logits):
    with tf.Graph().as_default():
        spec = head.create_estimator_spec(features={"w": tf.constant(W)}, mode=tf.estimator.ModeKeys.PREDICT,
                                          logits=tf.constant(logits))
        return sorted(spec.export_outputs.keys()), {
            k: type(v).__name__ + (":" + ",".join(sorted(v.outputs.keys())) if hasattr(v, "outputs") else "")
            for k, v in spec.export_outputs.items()}


def c_str_list(xs):
    return "{" + ", ".join('"%s"' % x for x in xs) + "}"


def c_floats(xs):
    return "{" + ", ".join("%.9g" % float(x) for x in xs) + "}"


def main():
    lines = ["/* Generated by scripts/gen_head_fixtures.py from TF %s (tensorflow-estimator heads). Do not edit. */"
             % tf.__version__, "#ifndef HEADS_FIXTURES_H", "#define HEADS_FIXTURES_H", "",
             "typedef struct hf_pred { const char *key; const char *dtype; int n; const double *v; "
             "const char *const *s; } hf_pred;",
             "typedef struct hf_case {", "  const char *name;", "  int nlogits; const float *logits;",
             "  int nlabels; const double *labels;", "  double loss_sobs, loss_sum;",
             "  int nmetrics; const char *const *metric_keys; const double *metric_values;",
             "  int npreds; const hf_pred *preds;",
             "  int nexports; const char *const *export_names; const char *const *export_kinds;",
             "  int nvocab; const char *const *vocab; /* label_vocabulary: labels are vocab[labels[i]] */",
             "} hf_case;", "",
             "static const float hf_weights[%d] = %s;" % (B, c_floats(flat(W))), ""]
    all_cases = [(n, mk, lg, lb, vc) for (n, mk, lg, lb, _, vc) in CASES]
    all_cases.append(("multi_head", make_multi, MULTI_LOGITS, MULTI_LABELS, None))
    rows = []
    for name, make, logits, labels, vocab in all_cases:
        if vocab is not None:
            tf_labels = tf.constant(np.array(vocab)[labels])
            flat_labels = flat(labels)
        elif isinstance(labels, dict):
            tf_labels = {k: tf.constant(v) for k, v in labels.items()}
            flat_labels = np.concatenate([flat(labels["b"]), flat(labels["m"])])
        else:
            dt = tf.float32 if labels.dtype.kind == "f" else tf.int64
            tf_labels = tf.constant(labels, dtype=dt)
            flat_labels = flat(labels)
        loss_sobs, mvals, pvals = eager_values(make(Red.SUM_OVER_BATCH_SIZE), tf.constant(logits), tf_labels)
        loss_sum, _, _ = eager_values(make(Red.SUM), tf.constant(logits), tf_labels)
        enames, ekinds = export_names(make(Red.SUM_OVER_BATCH_SIZE), logits)
        p = "hf_%s" % name
        lines.append("static const float %s_logits[] = %s;" % (p, c_floats(flat(logits))))
        lines.append("static const double %s_labels[] = %s;" % (p, c_floats(flat_labels)))
        mk = sorted(mvals)
        lines.append("static const char *const %s_mkeys[] = %s;" % (p, c_str_list(mk)))
        lines.append("static const double %s_mvals[] = %s;" % (p, c_floats([mvals[k] for k in mk])))
        pk = sorted(pvals)
        prs = []
        for i, k in enumerate(pk):
            v = pvals[k]
            if v.dtype.kind in "SO":
                strs = [x.decode() for x in flat(v)]
                lines.append("static const char *const %s_p%d[] = %s;" % (p, i, c_str_list(strs)))
                prs.append('{"%s", "string", %d, 0, %s_p%d}' % (k, len(strs), p, i))
            else:
                lines.append("static const double %s_p%d[] = %s;" % (p, i, c_floats(flat(v))))
                prs.append('{"%s", "%s", %d, %s_p%d, 0}' % (k, v.dtype.name, v.size, p, i))
        lines.append("static const hf_pred %s_preds[] = {%s};" % (p, ", ".join(prs)))
        lines.append("static const char *const %s_enames[] = %s;" % (p, c_str_list(enames)))
        lines.append("static const char *const %s_ekinds[] = %s;" % (p, c_str_list([ekinds[k] for k in enames])))
        vref = "0"
        if vocab is not None:
            lines.append("static const char *const %s_vocab[] = %s;" % (p, c_str_list(vocab)))
            vref = "%s_vocab" % p
        rows.append('  {"%s", %d, %s_logits, %d, %s_labels, %.9g, %.9g, %d, %s_mkeys, %s_mvals, %d, %s_preds, '
                    '%d, %s_enames, %s_ekinds, %d, %s}' % (name, logits.size, p, flat_labels.size, p, loss_sobs,
                                                           loss_sum, len(mk), p, p, len(pk), p, len(enames), p, p,
                                                           len(vocab or []), vref))
        lines.append("")
    lines.append("static const hf_case hf_cases[] = {\n%s\n};" % ",\n".join(rows))
    lines.append("#define HF_NCASES ((int)(sizeof hf_cases / sizeof hf_cases[0]))")
    lines.append("#endif")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", OUT, file=sys.stderr)


if __name__ == "__main__":
    main()
