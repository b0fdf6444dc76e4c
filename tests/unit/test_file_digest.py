"""The model file's digest, remembered across processes while the file is unchanged."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from retrieval_server.backends import file_digest
from retrieval_server.backends.file_digest import CACHE_FILE, cached_sha256

HOUR_NS = 3600 * 10**9


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every file actually read and hashed."""
    calls: list[Path] = []
    real = file_digest.sha256_hex

    def counting(path: Path) -> str:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(file_digest, "sha256_hex", counting)
    return calls


def _settled(path: Path, content: bytes, hours_ago: int = 1) -> None:
    path.write_bytes(content)
    then = time.time_ns() - hours_ago * HOUR_NS
    os.utime(path, ns=(then, then))


def test_an_unchanged_file_is_hashed_once(tmp_path: Path, hashed: list[Path]) -> None:
    model = tmp_path / "model.onnx"
    _settled(model, b"weights" * 1000)
    cache = tmp_path / "cache"
    expected = hashlib.sha256(b"weights" * 1000).hexdigest()
    assert cached_sha256(model, cache) == expected
    assert cached_sha256(model, cache) == expected
    assert hashed == [model]
    assert (cache / CACHE_FILE).is_file()


def test_a_changed_file_is_hashed_again(tmp_path: Path, hashed: list[Path]) -> None:
    model = tmp_path / "model.onnx"
    cache = tmp_path / "cache"
    _settled(model, b"a" * 64, hours_ago=2)
    first_mtime = model.stat().st_mtime_ns
    first = cached_sha256(model, cache)
    _settled(model, b"b" * 64)  # same size and inode, another mtime
    assert cached_sha256(model, cache) == hashlib.sha256(b"b" * 64).hexdigest() != first

    def restored(path: Path) -> None:  # what cp -p or touch -r leave: the first file's mtime
        os.utime(path, ns=(first_mtime, first_mtime))

    model.write_bytes(b"c" * 64)  # same size and inode, the mtime set back: only the ctime differs
    restored(model)
    assert cached_sha256(model, cache) == hashlib.sha256(b"c" * 64).hexdigest()
    replacement = tmp_path / "new.onnx"
    replacement.write_bytes(b"d" * 64)
    restored(replacement)
    os.replace(replacement, model)  # same size and mtime, another inode
    assert cached_sha256(model, cache) == hashlib.sha256(b"d" * 64).hexdigest()
    assert len(hashed) == 4


def test_models_of_removed_folders_are_forgotten(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    old, kept = tmp_path / "old.onnx", tmp_path / "kept.onnx"
    _settled(old, b"old")
    _settled(kept, b"kept")
    cached_sha256(old, cache)
    old.unlink()
    cached_sha256(kept, cache)
    assert list(json.loads((cache / CACHE_FILE).read_text())) == [str(kept.resolve())]


def test_a_file_modified_just_now_is_not_remembered(tmp_path: Path, hashed: list[Path]) -> None:
    model = tmp_path / "model.onnx"
    model.write_bytes(b"fresh")
    cache = tmp_path / "cache"
    cached_sha256(model, cache)
    cached_sha256(model, cache)
    assert len(hashed) == 2 and not (cache / CACHE_FILE).exists()


def test_a_cache_that_cannot_be_used_only_costs_the_hashing(tmp_path: Path, hashed: list[Path]) -> None:
    model = tmp_path / "model.onnx"
    _settled(model, b"weights")
    expected = hashlib.sha256(b"weights").hexdigest()
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    assert cached_sha256(model, not_a_folder) == expected
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / CACHE_FILE).write_text("{not json")
    assert cached_sha256(model, corrupt) == expected
    assert cached_sha256(model, corrupt) == expected  # rewritten whole: now read from it
    assert cached_sha256(model, None) == expected
    assert len(hashed) == 3
    assert not [p for p in corrupt.iterdir() if p.name != CACHE_FILE]  # no temporary file left
