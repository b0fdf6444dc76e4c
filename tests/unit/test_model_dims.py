"""Models' embedding sizes, remembered by model id so that a start knows its vectors' size before the session exists."""

from __future__ import annotations

import json
from pathlib import Path

from retrieval_server.backends.model_dims import CACHE_FILE, KEPT, known_dim, remember_dim


def test_a_remembered_size_is_known_to_the_next_process(tmp_path: Path) -> None:
    assert known_dim("onnx:a", tmp_path) is None
    remember_dim("onnx:a", 384, tmp_path)
    remember_dim("onnx:b", 32, tmp_path)
    assert (known_dim("onnx:a", tmp_path), known_dim("onnx:b", tmp_path)) == (384, 32)
    remember_dim("onnx:a", 768, tmp_path)
    assert known_dim("onnx:a", tmp_path) == 768


def test_only_the_latest_models_are_kept(tmp_path: Path) -> None:
    for i in range(KEPT + 5):
        remember_dim(f"onnx:{i}", 8 + i, tmp_path)
    remember_dim("onnx:0", 8, tmp_path)  # remembered again: the newest now
    entries = json.loads((tmp_path / CACHE_FILE).read_text())
    assert len(entries) == KEPT and known_dim("onnx:0", tmp_path) == 8
    assert [known_dim(f"onnx:{i}", tmp_path) for i in range(1, 6)] == [None] * 5 and known_dim("onnx:6", tmp_path) == 14
    assert known_dim(f"onnx:{KEPT + 4}", tmp_path) == KEPT + 12


def test_what_is_not_a_size_is_not_believed(tmp_path: Path) -> None:
    (tmp_path / CACHE_FILE).write_text(json.dumps({"a": "384", "b": 0, "c": -3, "d": True, "e": 3.5, "f": None}))
    assert [known_dim(k, tmp_path) for k in "abcdef"] == [None] * 6
    (tmp_path / CACHE_FILE).write_text("{not json")
    assert known_dim("a", tmp_path) is None
    remember_dim("a", 16, tmp_path)  # an unreadable cache is replaced
    assert known_dim("a", tmp_path) == 16


def test_without_a_writable_cache_nothing_is_remembered_and_nothing_fails(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    remember_dim("a", 16, blocked)
    remember_dim("a", 16, None)
    assert known_dim("a", blocked) is None and known_dim("a", None) is None
