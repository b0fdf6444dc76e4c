"""scoring_core's kernels are made at their first call: importing it costs no numba."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import scoring_core
from scoring_core import rrf, top_k
from scoring_core._jit import KERNELS, Kernel
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


_TOP_K_RUN = """
import logging, numpy as np
from scoring_core import reference, top_k
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
scores = np.array([0.3, 0.9, -0.1, 0.5, 0.9], dtype=np.float32)
print(top_k(scores, 3).tolist() == reference.top_k(scores.tolist(), 3) == [1, 4, 3])
"""


def _run_top_k(cache_dir: Path) -> subprocess.CompletedProcess[str]:
    # numba reads NUMBA_CACHE_DIR when it is imported, and keeps what it compiled: a process each.
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(Path(__file__).parents[3])}
    return subprocess.run([sys.executable, "-c", _TOP_K_RUN], capture_output=True, text=True, timeout=300, check=True, env=env)


@pytest.mark.parametrize(("suffix", "damage"), [("nbi", "truncated"), ("nbc", "emptied")])
def test_a_damaged_cache_entry_is_removed_and_the_kernel_compiled_without_it(tmp_path: Path, suffix: str, damage: str) -> None:
    assert _run_top_k(tmp_path).stdout.split() == ["True"]
    entry = sorted(tmp_path.rglob(f"selection._top_k_kernel.*.{suffix}"))[0]
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) // 2] if damage == "truncated" else b"")  # a kill or a full disk mid-write

    run = _run_top_k(tmp_path)
    assert run.stdout.split() == ["True"]  # compiled, and agreeing with its twin
    assert "cannot be used" in run.stderr and "NUMBA_CACHE_DIR" in run.stderr and entry.name in run.stderr
    assert not list(tmp_path.rglob("selection._top_k_kernel.*"))  # the next start caches it anew


_NO_CACHE_FOLDER_RUN = """
import errno, numba.core.caching

def read_only(locator):  # what probing a folder gives on a read-only file system, whoever runs it
    raise OSError(errno.EROFS, "Read-only file system", locator.get_cache_path())

numba.core.caching._CacheLocator.ensure_cache_path = read_only
""" + _TOP_K_RUN


def test_a_kernel_numba_finds_no_cache_folder_for_is_compiled_without_the_cache(tmp_path: Path) -> None:
    # As with `docker run --read-only` and no volume for the cache: NUMBA_CACHE_DIR, the source tree
    # and ~/.cache all refuse the file numba probes each with (root included, hence the patch).
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}
    env["PYTHONPATH"] = str(Path(__file__).parents[3])
    run = subprocess.run([sys.executable, "-c", _NO_CACHE_FOLDER_RUN], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True"]
    warnings = [line for line in run.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 3, warnings  # once for each kernel top_k runs: _top_k_kernel, _sift_down and _worse
    assert all("no folder for numba's cache" in w and "NUMBA_CACHE_DIR" in w for w in warnings), warnings
    assert not list(tmp_path.iterdir())


_CALLEE = """
from scoring_core._jit import kernel

@kernel("int64(int64)")
def bump(x):
    return x + {step}
"""

_CALLER = """
from scoring_core._jit import kernel
from callee import bump

@kernel("int64(int64)")
def twice(x):
    return bump(bump(x))
"""


def test_a_kernel_runs_its_callees_new_code_once_their_source_changed(tmp_path: Path) -> None:
    """numba checks a cache entry against its own function's source file alone, while the code of
    the kernels it calls is compiled into it: a kernel changed in place (a checkout updated, an
    editable install) was run as changed when called, and as it was before by every kernel calling
    it from another file (fusion's and dedup's sorts and top_k), until those files changed too."""
    (tmp_path / "callee.py").write_text(_CALLEE.format(step=1))
    (tmp_path / "caller.py").write_text(_CALLER)
    cache = tmp_path / "cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": f"{tmp_path}{os.pathsep}{Path(__file__).parents[3]}"}
    script = "import callee, caller; print(callee.bump(0), caller.twice(0))"

    def run() -> list[str]:
        return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True, env=env).stdout.split()

    assert run() == ["1", "2"]
    assert run() == ["1", "2"]  # from the cache
    entries = {p.name for p in cache.rglob("*.nb*")}
    (tmp_path / "callee.py").write_text(_CALLEE.format(step=10))  # caller.py is not touched
    assert run() == ["10", "20"]
    # The caller's entries made with the old callee are gone, not kept beside the new ones.
    assert len({p.name for p in cache.rglob("*.nb*")}) == len(entries)
    assert run() == ["10", "20"]


_CHANGED_AFTER_IMPORT = """
import pathlib, sys, callee, caller
pathlib.Path(sys.argv[1]).write_text(sys.argv[2])  # a checkout updated before the first call
print(callee.bump(0), caller.twice(0))
"""


def test_a_source_changed_between_import_and_first_call_caches_the_code_that_was_compiled(tmp_path: Path) -> None:
    """A kernel is compiled at its first call from the code imported, which a checkout updated in
    between (a test session's minutes, a server's start) no longer matches: its entry was named for
    the file read at that call, so every later process running the new code was given the old."""
    (tmp_path / "callee.py").write_text(_CALLEE.format(step=1))
    (tmp_path / "caller.py").write_text(_CALLER)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": f"{tmp_path}{os.pathsep}{Path(__file__).parents[3]}"}

    def run(*argv: str) -> list[str]:
        return subprocess.run([sys.executable, "-c", *argv], capture_output=True, text=True, timeout=300, check=True, env=env).stdout.split()

    changed = run(_CHANGED_AFTER_IMPORT, str(tmp_path / "callee.py"), _CALLEE.format(step=10))
    assert changed == ["1", "2"]  # the code it imported
    assert run("import callee, caller; print(callee.bump(0), caller.twice(0))") == ["10", "20"]

def test_another_pythons_entries_of_the_same_code_are_kept(tmp_path: Path) -> None:
    # numba names an entry for the Python that made it (".py311."); two interpreters sharing a cache
    # (NUMBA_CACHE_DIR, or a checkout's __pycache__ used by venvs of two Pythons) each removed the
    # other's entries of the calling kernels as if of old code: every start compiled them again.
    assert _run_top_k(tmp_path).stdout.split() == ["True"]
    tag = f".py{sys.version_info[0]}{sys.version_info[1]}{sys.abiflags}."
    other = ".py39." if tag != ".py39." else ".py310."
    theirs = []
    for ours in tmp_path.rglob("selection._top_k_kernel.*"):
        theirs.append(ours.with_name(ours.name.replace(tag, other)))
        shutil.copyfile(ours, theirs[-1])
    assert theirs and all(other in p.name for p in theirs)

    assert _run_top_k(tmp_path).stdout.split() == ["True"]
    assert [p.name for p in theirs if not p.exists()] == []


def test_a_kernel_that_fails_to_compile_otherwise_still_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    import numba

    def njit(*args: object, **options: object) -> object:
        raise RuntimeError("a failure of numba's own")

    monkeypatch.setattr(numba, "njit", njit)
    monkeypatch.setattr(_top_k_kernel, "_dispatcher", None)
    with pytest.raises(RuntimeError, match="a failure of numba's own"):
        _top_k_kernel.dispatcher()


def _counting_compiles(monkeypatch: pytest.MonkeyPatch, stop: threading.Event, stop_after: int) -> list[Kernel]:
    """Every kernel unresolved, and resolving one recorded instead of compiled; ``stop`` is set
    once ``stop_after`` have been."""
    compiled: list[Kernel] = []

    def resolve(kernel: Kernel) -> object:
        compiled.append(kernel)
        if len(compiled) >= stop_after:
            stop.set()
        return kernel.py_func

    monkeypatch.setattr(Kernel, "_resolve", resolve)
    for k in KERNELS:
        monkeypatch.setattr(k, "_dispatcher", None)
    return compiled


def test_warm_up_loads_every_kernel_each_after_the_kernels_it_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled = _counting_compiles(monkeypatch, threading.Event(), stop_after=len(KERNELS) + 1)
    scoring_core.warm_up()
    assert compiled == KERNELS and len(KERNELS) >= 15
    # So a kernel's resolution compiles that kernel alone, and a stop waits for one compile at most.
    for i, k in enumerate(KERNELS):
        callees = {v for name in k.py_func.__code__.co_names if isinstance(v := k.py_func.__globals__.get(name), Kernel)}
        assert callees <= set(KERNELS[:i]), k.__qualname__


def test_warm_up_stops_before_the_next_kernel_once_told(monkeypatch: pytest.MonkeyPatch) -> None:
    stop = threading.Event()
    compiled = _counting_compiles(monkeypatch, stop, stop_after=1)  # told during the first compile
    scoring_core.warm_up(stop)
    assert compiled == KERNELS[:1]
    scoring_core.warm_up(stop)  # told before it starts: nothing more
    assert compiled == KERNELS[:1]
