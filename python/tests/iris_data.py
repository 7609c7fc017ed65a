"""Debian python3-sklearn's iris.csv as numpy arrays, for the tests."""
import os

import numpy as np
import pytest

IRIS = "/usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv"


def iris():
    """(features float32 [150, 4], labels int64 [150]); skips the test without the file."""
    if not os.path.exists(IRIS):
        pytest.skip("iris.csv not found (Debian package python3-sklearn)")
    d = np.loadtxt(IRIS, delimiter=",", skiprows=1)
    return d[:, :4].astype(np.float32), d[:, 4].astype(np.int64)


def dense(X):
    """The features as the tests' columns read them: x (2 values), pl, pw."""
    return {"x": X[:, :2], "pl": X[:, 2:3], "pw": X[:, 3:4]}
