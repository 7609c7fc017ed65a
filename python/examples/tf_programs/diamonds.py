"""Shared data loading for the diamonds programs (plain csv + numpy, as TF
tutorials load small CSVs). Not a TF program itself."""
import csv
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("DIAMONDS_DIR", os.path.join(HERE, "..", "..", "..", "tests", "fixtures", "data"))
CSV = os.path.join(DATA, "diamonds_200.csv")
CLARITY_VOCAB = os.path.join(DATA, "diamonds_clarity.txt")
NUMERIC = ["carat", "depth", "table", "x", "y", "z"]
CATEGORICAL = ["cut", "color", "clarity"]


def load(seed, n_train=160):
    """(train_features, train_price, test_features, test_price): dicts of
    numpy arrays (float32 numbers, str categories) split after a seeded
    shuffle."""
    with open(CSV) as f:
        rows = list(csv.DictReader(f))
    idx = np.random.default_rng(seed).permutation(len(rows))
    rows = [rows[i] for i in idx]
    feats = {k: np.array([float(r[k]) for r in rows], np.float32) for k in NUMERIC}
    feats.update({k: np.array([r[k] for r in rows], object) for k in CATEGORICAL})
    price = np.array([float(r["price"]) for r in rows], np.float32)
    tr = {k: v[:n_train] for k, v in feats.items()}
    te = {k: v[n_train:] for k, v in feats.items()}
    return tr, price[:n_train], te, price[n_train:]
