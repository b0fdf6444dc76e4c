"""scoring_core's kernels are made at their first call: importing it costs no numba."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from scoring_core import rrf, top_k
from scoring_core._jit import Kernel
from scoring_core.selection import _top_k_kernel


def test_importing_scoring_core_imports_no_numba() -> None:
    script = "import sys, scoring_core; print('numba' in sys.modules, 'llvmlite' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True).stdout.split()
    assert out == ["False", "False"]


def test_a_kernel_keeps_its_signatures_and_refuses_other_types() -> None:
    assert top_k(np.array([0.1, 0.5, 0.3], dtype=np.float32), 2).tolist() == [1, 2]
    assert isinstance(_top_k_kernel, Kernel)
    dispatcher = _top_k_kernel.dispatcher()
    assert len(dispatcher.signatures) == 2  # float32 and float64 scores, as declared
    with pytest.raises(TypeError):
        _top_k_kernel(np.array([3, 1, 2]), 1)  # int64 scores: no new specialization is compiled
    assert len(dispatcher.signatures) == 2


def test_a_kernel_calling_kernels_runs_compiled() -> None:
    # _rrf_kernel calls _sum_by_id, which calls _top_k_kernel and the radix sort: all resolved.
    fused = rrf([[1, 2, 3], [3, 2]], k=60)
    assert fused.ids.tolist() == [3, 2, 1]  # 1/63 + 1/61 > 2/62 > 1/61
    from scoring_core.fusion import _rrf_kernel, _sum_by_id

    assert _sum_by_id.dispatcher().signatures and _rrf_kernel.dispatcher().signatures
