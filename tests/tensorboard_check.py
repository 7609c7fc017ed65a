"""TensorBoard reads loom's event files (tests/test_tensorboard.c).

usage: tensorboard_check.py <logdir>

Loads every events.out.tfevents.* file in logdir with TensorBoard's own
EventAccumulator (tensorboard.backend.event_processing), keeping every
event, and prints one line "tensorboard_check: <json>" with what TensorBoard
saw: {"scalars": {tag: [[step, value], ...]},
      "histograms": {tag: [[step, min, max, num, sum, sum_squares, nbuckets, bucket_total], ...]},
      "images": {tag: [[step, width, height, the PNG signature is first (bool)], ...]},
      "graph": [[name, op, [inputs]], ...] or null,
      "ui_graph_nodes": n (the graph after process_graph.prepare_graph_for_ui, as the graph plugin serves it)}
The C test compares it with what loom wrote. Exits 1 if the accumulator fails.
"""
import glob
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
from tensorboard.backend import process_graph  # noqa: E402
from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: E402


def main(logdir):
    files = sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*")))
    if not files:
        print(f"tensorboard_check: no event files in {logdir}")
        return 1
    out = {"scalars": {}, "histograms": {}, "images": {}, "graph": None, "ui_graph_nodes": None}
    for path in files:
        acc = ea.EventAccumulator(path, size_guidance=ea.STORE_EVERYTHING_SIZE_GUIDANCE)
        acc.Reload()
        tags = acc.Tags()
        for t in tags[ea.SCALARS]:
            out["scalars"].setdefault(t, []).extend([[e.step, e.value] for e in acc.Scalars(t)])
        for t in tags[ea.HISTOGRAMS]:
            out["histograms"].setdefault(t, []).extend(
                [[e.step, h.min, h.max, h.num, h.sum, h.sum_squares, len(h.bucket), sum(h.bucket)]
                 for e in acc.Histograms(t) for h in [e.histogram_value]])
        for t in tags[ea.IMAGES]:
            out["images"].setdefault(t, []).extend(
                [[e.step, e.width, e.height, e.encoded_image_string[:8] == b"\x89PNG\r\n\x1a\n"]
                 for e in acc.Images(t)])
        if tags[ea.GRAPH]:
            g = acc.Graph()
            out["graph"] = [[n.name, n.op, list(n.input)] for n in g.node]
            process_graph.prepare_graph_for_ui(g)
            out["ui_graph_nodes"] = len(g.node)
    print("tensorboard_check: " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
