"""scoring_core: the retrieval hot path as pure computation.

numpy arrays in, numpy arrays out; numba kernels with plain-Python twins in
:mod:`scoring_core.reference`; ONNX encoders in :mod:`scoring_core.encoders`.
No I/O beyond loading model files, no asyncio, and no import from retrieval_server.
"""

from scoring_core.grouping import GroupedHits, group_by_parent

__all__ = ["GroupedHits", "group_by_parent"]
