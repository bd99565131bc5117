"""Verdicts the gemm studies share: a GEMM comparison's win, tie or loss, and the multicast
microbenchmark's verdict at a GEMM's cluster shape and A tile (from the multicast study's 2-D
pattern rows, ``speedup.csv``)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .rows import TIE_TOLERANCE


def gemm_verdict(gain: pd.Series, spread: pd.Series) -> pd.Series:
    """win, tie or loss of each ``gain`` (ratio over the baseline), a tie within TIE_TOLERANCE or the
    runs' ``spread``."""
    tolerance = np.maximum(TIE_TOLERANCE, spread.fillna(0))
    return pd.Series(np.where(gain > 1 + tolerance, "win", np.where(gain < 1 - tolerance, "loss", "tie")),
                     index=gain.index)


def multicast_prediction(busy: pd.DataFrame, verdicts: pd.DataFrame, ws: str) -> pd.Series:
    """The microbenchmark's verdict (win, tie, loss; NaN: none at that tile) for each comparison."""
    table = verdicts[verdicts.working_set == ws].set_index(["cluster_x", "cluster_y", "tile_bytes"])
    return pd.Series([table.status_vs_no_cluster.get((r.cluster_m, r.cluster_n, r.a_tile_bytes), np.nan)
                      for r in busy.itertuples()], index=busy.index)
