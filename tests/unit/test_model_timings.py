"""The timings kept per machine: found again under the same fingerprint only, and never fatal."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from retrieval_server.backends.model_timings import FILE_NAME, MachineTimings, fingerprint

TIMINGS = {"int8_ms": 80.0, "fp32_ms": 100.0, "fp32_over_int8": 1.25, "rounds": 5, "texts_per_round": 8}
MODELS = {"int8": "onnx:aaaa", "fp32": "onnx-fp32:bbbb.g1"}


def test_timings_are_found_again_under_the_same_fingerprint_only(tmp_path: Path) -> None:
    here = MachineTimings(tmp_path / FILE_NAME, fingerprint(threads=None, models=MODELS))
    assert here.get() is None
    here.put(TIMINGS)
    # Other users' services share the cache folder, as they share the fp32 build written the same way.
    assert (tmp_path / FILE_NAME).stat().st_mode & 0o777 == 0o644
    assert MachineTimings(tmp_path / FILE_NAME, fingerprint(threads=None, models=MODELS)).get() == TIMINGS
    for other in (fingerprint(threads=2, models=MODELS), fingerprint(threads=None, models={**MODELS, "fp32": "onnx-fp32:cccc.g2"})):
        assert MachineTimings(tmp_path / FILE_NAME, other).get() is None
    # Another fingerprint's entry is added beside, not over, this one.
    elsewhere = MachineTimings(tmp_path / FILE_NAME, fingerprint(threads=2, models=MODELS))
    elsewhere.put({**TIMINGS, "fp32_over_int8": 0.5})
    assert here.get() == TIMINGS and elsewhere.get() == {**TIMINGS, "fp32_over_int8": 0.5}


def test_the_fingerprint_names_what_the_speed_depends_on() -> None:
    machine = fingerprint(threads=3, models=MODELS)
    assert machine["intra_op_threads"] == "3" and machine["model_int8"] == MODELS["int8"] and machine["model_fp32"] == MODELS["fp32"]
    assert machine["cpu"] and len(machine["cpu_flags"]) == 16 and int(machine["usable_cores"]) >= 1 and machine["onnxruntime"]


@pytest.mark.parametrize("content", ["{not json", '["a list"]', '{"entries": 3}', '{"entries": {"KEY": "text"}}'])
def test_a_damaged_file_is_ignored_and_then_replaced(tmp_path: Path, content: str) -> None:
    path = tmp_path / FILE_NAME
    kept = MachineTimings(path, fingerprint(threads=None, models=MODELS))
    path.write_text(content.replace("KEY", kept.key))
    assert kept.get() is None
    kept.put(TIMINGS)
    assert kept.get() == TIMINGS


def test_a_folder_that_cannot_be_written_only_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("where the cache folder would go")
    kept = MachineTimings(blocker / "cache" / FILE_NAME, fingerprint(threads=None, models=MODELS))
    with caplog.at_level(logging.WARNING):
        kept.put(TIMINGS)
    assert kept.get() is None and "could not keep the model timings" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
