"""scoring_core: the retrieval hot path as pure computation.

numpy arrays in, numpy arrays out; numba kernels with plain-Python twins in
:mod:`scoring_core.reference`; ONNX encoders in :mod:`scoring_core.encoders`.
No I/O beyond loading model files, no asyncio, and no import from retrieval_server.
"""

import numpy as np

from scoring_core.grouping import GroupedHits, group_by_parent


def warm_up() -> None:
    """Load (or compile into numba's cache) every kernel, so the first request doesn't pay for it."""
    group_by_parent(np.zeros(2, dtype=np.int64), np.ones(2, dtype=np.float32), 1)


__all__ = ["GroupedHits", "group_by_parent", "warm_up"]
