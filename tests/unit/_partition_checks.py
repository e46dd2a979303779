"""Invariants every partition must satisfy, shared by the scheme tests."""

import numpy as np
import pandas as pd


def check_partition(frame: pd.DataFrame, clients: int, n_samples: int) -> None:
    """Each sample at most once, train and test disjoint, K clients each with both."""
    assert not frame["index"].duplicated().any()
    assert frame["index"].between(0, n_samples - 1).all()
    train = set(frame.loc[frame["split"] == "train", "index"])
    test = set(frame.loc[frame["split"] == "test", "index"])
    assert not train & test
    assert sorted(frame["client"].unique()) == list(range(clients))
    counts = frame.groupby(["client", "split"]).size().unstack(fill_value=0)
    assert (counts["train"] >= 1).all() and (counts["test"] >= 1).all()


def labels_per_client(frame: pd.DataFrame, labels: np.ndarray) -> pd.Series:
    """Number of distinct labels each client holds."""
    return pd.Series(labels[frame["index"]]).groupby(frame["client"].to_numpy()).nunique()
