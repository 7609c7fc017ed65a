#!/usr/bin/env python3
"""Reference values for loom.tf's heads (python/tests/test_tf_heads.py)
from TF 2.15's tf.estimator heads (tensorflow-estimator 2.15), on the cases
of scripts/gen_head_fixtures.py (fixed logits, labels and weight column "w").

Writes python/tests/fixtures/tf_heads.json: per case the logits, labels
(vocabulary strings where the case has one), the weights, head.loss under
SUM_OVER_BATCH_SIZE and SUM, the eval metrics after one update on the
batch (head.update_metrics) and head.predictions' values (strings decoded);
for a few cases also the loss and metrics with regularization_losses REG.

Run: $(scripts/peer_venv.sh tf) scripts/gen_tf_head_fixtures.py
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_head_fixtures as G  # noqa: E402  (TF imported there)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

REG = [0.5, 0.25]
REG_CASES = ("binary_named", "multi_class", "multi_head")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests", "fixtures",
                   "tf_heads.json")


def main():
    out = {"tf_version": tf.__version__, "weights": G.W.reshape(-1).tolist(), "cases": {}, "regularization_losses": REG}
    cases = [(n, mk, lg, lb, vc) for (n, mk, lg, lb, _, vc) in G.CASES]
    cases.append(("multi_head", G.make_multi, G.MULTI_LOGITS, G.MULTI_LABELS, None))
    for name, make, logits, labels, vocab in cases:
        if vocab is not None:
            tf_labels = tf.constant(np.array(vocab)[labels])
            jl = np.array(vocab)[labels].tolist()
        elif isinstance(labels, dict):
            tf_labels = {k: tf.constant(v) for k, v in labels.items()}
            jl = {k: v.tolist() for k, v in labels.items()}
        else:
            tf_labels = tf.constant(labels, dtype=tf.float32 if labels.dtype.kind == "f" else tf.int64)
            jl = labels.tolist()
        loss_sobs, mvals, pvals = G.eager_values(make(G.Red.SUM_OVER_BATCH_SIZE), tf.constant(logits), tf_labels)
        loss_sum, _, _ = G.eager_values(make(G.Red.SUM), tf.constant(logits), tf_labels)
        preds = {}
        for k, v in pvals.items():
            if v.dtype.kind in "SO":
                preds[k] = {"dtype": "string", "value": [[x.decode() for x in r] for r in v.tolist()]}
            else:
                preds[k] = {"dtype": v.dtype.name, "value": v.tolist()}
        if name in REG_CASES:
            head = make(G.Red.SUM_OVER_BATCH_SIZE)
            reg = [tf.constant(r) for r in REG]
            feats = {"w": tf.constant(G.W)}
            rloss = float(head.loss(labels=tf_labels, logits=tf.constant(logits), features=feats,
                                    regularization_losses=reg).numpy())
            rm = head.update_metrics(head.metrics(regularization_losses=reg), feats, tf.constant(logits), tf_labels,
                                     regularization_losses=reg)
            out.setdefault("regularized", {})[name] = {"loss": rloss,
                                                       "metrics": {k: float(m.result().numpy()) for k, m in rm.items()}}
        out["cases"][name] = {"logits": logits.tolist(), "labels": jl, "vocab": vocab, "loss_sobs": loss_sobs,
                              "loss_sum": loss_sum, "metrics": mvals, "predictions": preds}
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    print("wrote", OUT, file=sys.stderr)


if __name__ == "__main__":
    main()
