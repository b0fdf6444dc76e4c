"""The service picks int8 or fp32 when an index is created, records why, and keeps it for the index's life."""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import json
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from retrieval_server.app import Application
from retrieval_server.backends import minilm_fp32, model_choice
from retrieval_server.backends.embedder import int8_model
from retrieval_server.backends.minilm_fp32 import fp32_model, fp32_model_id
from retrieval_server.backends.model_choice import How, Precision, Timings
from retrieval_server.backends.model_timings import FILE_NAME
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource, QueryOptions, Unavailable, WrongModel
from scoring_core.model_builder import BertShape, build_sentence_encoder, random_weights
from tests.support.paths import require_fp32_package

INT8_FASTER = Timings(int8_ms=80.0, fp32_ms=100.0, fp32_over_int8=1.25, rounds=5, texts_per_round=8)
FP32_FASTER = Timings(int8_ms=100.0, fp32_ms=80.0, fp32_over_int8=0.8, rounds=5, texts_per_round=8)
DOC = DocumentSource(filename="glaciers.txt", document_id="glaciers", content=b"Glaciers carve U-shaped valleys over thousands of years.")


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_fp32_package()
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(autouse=True)
def no_kept_timings(request: pytest.FixtureRequest) -> None:
    """Each test starts on a machine that never timed the models (the fp32 build is shared)."""
    if "model_cache" in request.fixturenames:
        (request.getfixturevalue("model_cache") / FILE_NAME).unlink(missing_ok=True)


class Timer:
    """Stands in for the measurement with fixed numbers, after checking it got both real encoders."""

    def __init__(self, timings: Timings | None) -> None:
        self.timings = timings
        self.calls = 0

    def __call__(self, encoders: Mapping[Precision, Callable[[Sequence[str]], object]], rounds: int = 5) -> Timings:
        self.calls += 1
        if self.timings is None:
            raise AssertionError("measured although the index had recorded its model")
        int8, fp32 = (np.asarray(encoders[p](["probe"])) for p in (Precision.INT8, Precision.FP32))
        assert int8.shape == fp32.shape == (1, 384) and not np.array_equal(int8, fp32)
        return self.timings


def _timer(monkeypatch: pytest.MonkeyPatch, timings: Timings | None) -> Timer:
    timer = Timer(timings)
    monkeypatch.setattr(model_choice, "measure", timer)
    return timer


async def _open(data: Path, cache: Path, **overrides: object) -> Application:
    overrides.setdefault("model", "auto")
    app = Application(load_settings(data_dir=data, model_cache_dir=cache, cache_backend="none", metrics_enabled=False, **overrides))
    await app.open()
    return app


@pytest.mark.parametrize(("timings", "expected"), [(INT8_FASTER, Precision.INT8), (FP32_FASTER, Precision.FP32)])
async def test_a_new_index_takes_the_faster_model_and_keeps_it_after_restart(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch, timings: Timings, expected: Precision
) -> None:
    timer = _timer(monkeypatch, timings)
    app = await _open(tmp_path, model_cache)
    try:
        expected_id = int8_model().model_id if expected is Precision.INT8 else fp32_model_id()
        assert timer.calls == 1 and app.model_choice == model_choice.ModelChoice(expected, How.MEASURED, timings)
        assert app.embedder.model_id == expected_id
        health = {c.name: c.detail for c in (await app.health()).components}
        assert f"{expected.value}, measured" in health["embedder"] and "fp32/int8" in health["embedder"]
        await app.ingest([DOC])
    finally:
        await app.close()
    # The opposite numbers now: a restart must not measure again, nor switch.
    _timer(monkeypatch, None)
    again = await _open(tmp_path, model_cache)
    try:
        assert again.model_choice == model_choice.ModelChoice(expected, How.MEASURED, timings)
        assert again.embedder.model_id == expected_id
        assert [c.document.document_id for c in (await again.pipeline.query(QueryOptions("what carves valleys", 1))).contexts] == ["glaciers"]
    finally:
        await again.close()


async def test_a_new_index_on_the_same_machine_reuses_the_timings_until_the_machine_changes(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _timer(monkeypatch, FP32_FASTER)
    first = await _open(tmp_path / "first", model_cache)
    await first.close()
    _timer(monkeypatch, None)  # measuring again would fail
    second = await _open(tmp_path / "second", model_cache)
    try:
        assert second.model_choice == model_choice.ModelChoice(Precision.FP32, How.MEASURED_BEFORE, FP32_FASTER)
        assert second.embedder.model_id == fp32_model_id()
        assert "when an earlier index was created" in {c.name: c.detail for c in (await second.health()).components}["embedder"]
        await second.ingest([DOC])
    finally:
        await second.close()
    # The index records the choice like a measured one: a restart keeps it.
    again = await _open(tmp_path / "second", model_cache)
    assert again.model_choice == model_choice.ModelChoice(Precision.FP32, How.MEASURED_BEFORE, FP32_FASTER)
    await again.close()
    # Another intra-op thread count is another machine as far as speed goes: it measures.
    timer = _timer(monkeypatch, INT8_FASTER)
    third = await _open(tmp_path / "third", model_cache, embed_threads=1)
    try:
        assert timer.calls == 1 and third.model_choice == model_choice.ModelChoice(Precision.INT8, How.MEASURED, INT8_FASTER)
    finally:
        await third.close()
    # A close call does not stand for the machine: the next new index measures again and keeps its numbers.
    close = Timings(int8_ms=100.0, fp32_ms=97.0, fp32_over_int8=0.97, rounds=5, texts_per_round=8)
    _timer(monkeypatch, close)
    await (await _open(tmp_path / "close", model_cache, embed_threads=2)).close()
    timer = _timer(monkeypatch, FP32_FASTER)
    app = await _open(tmp_path / "after-close", model_cache, embed_threads=2)
    assert timer.calls == 1 and app.model_choice == model_choice.ModelChoice(Precision.FP32, How.MEASURED, FP32_FASTER)
    await app.close()
    # Both machines' numbers are kept side by side.
    _timer(monkeypatch, None)
    for name, threads, expected in (("fourth", None, Precision.FP32), ("fifth", 1, Precision.INT8), ("sixth", 2, Precision.FP32)):
        app = await _open(tmp_path / name, model_cache, embed_threads=threads)
        assert app.model_choice is not None and (app.model_choice.model, app.model_choice.how) == (expected, How.MEASURED_BEFORE)
        await app.close()


async def test_an_index_is_never_opened_with_the_other_model(tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _timer(monkeypatch, INT8_FASTER)
    app = await _open(tmp_path, model_cache)
    await app.ingest([DOC])
    await app.close()
    _timer(monkeypatch, None)
    with pytest.raises(Unavailable, match="built with embedding model onnx:.*but onnx-fp32:"):
        await _open(tmp_path, model_cache, model="fp32")
    # Forcing the model it has is fine, and keeps the measured numbers.
    app = await _open(tmp_path, model_cache, model="int8")
    assert app.model_choice is not None and app.model_choice.how is How.MEASURED
    await app.close()


async def test_forcing_a_model_skips_the_measurement_and_is_recorded(tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _timer(monkeypatch, None)
    app = await _open(tmp_path, model_cache, model="fp32")
    try:
        assert app.model_choice == model_choice.ModelChoice(Precision.FP32, How.FORCED)
        assert app.embedder.model_id == fp32_model_id()
        await app.ingest([DOC])
    finally:
        await app.close()
    app = await _open(tmp_path, model_cache)  # auto: the index's recorded model
    try:
        assert app.embedder.model_id == fp32_model_id() and app.model_choice is not None and app.model_choice.how is How.FORCED
    finally:
        await app.close()


async def test_an_index_from_before_the_choice_keeps_its_int8_model(tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = await _open(tmp_path, model_cache, model="int8")
    await app.ingest([DOC])
    await app.metadata.set_info(model_choice.INFO_KEY, "")  # what an older service left: the model id alone
    await app.close()
    _timer(monkeypatch, FP32_FASTER)
    app = await _open(tmp_path, model_cache)
    try:
        assert app.model_choice == model_choice.ModelChoice(Precision.INT8, How.RECORDED)
        assert app.embedder.model_id == int8_model().model_id
    finally:
        await app.close()


@pytest.mark.parametrize("newer", [
    {"timings": {**dataclasses.asdict(INT8_FASTER), "threads": 2}},  # a timing this version does not know
    {"how": "measured by the supervisor"},
    {"model": "int4"},
    ["int8", "measured"],  # valid JSON, but no object: read as one, it escaped start-up as an AttributeError
    None,
])
async def test_a_choice_recorded_by_another_version_defers_to_the_model_id(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch, newer: dict[str, object] | list[str] | None
) -> None:
    _timer(monkeypatch, INT8_FASTER)
    app = await _open(tmp_path, model_cache)
    await app.ingest([DOC])
    ours = json.loads(model_choice.ModelChoice(Precision.INT8, How.MEASURED, INT8_FASTER).to_json())
    record = json.dumps({**ours, **newer} if isinstance(newer, dict) else newer)
    await app.metadata.set_info(model_choice.INFO_KEY, record)
    await app.close()
    _timer(monkeypatch, None)
    app = await _open(tmp_path, model_cache)
    try:
        assert app.model_choice == model_choice.ModelChoice(Precision.INT8, How.RECORDED)
        assert app.embedder.model_id == int8_model().model_id
        assert await app.metadata.get_info(model_choice.INFO_KEY) == record  # left for the version that wrote it
    finally:
        await app.close()


async def test_an_index_built_from_a_model_folder_is_refused_without_it(tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "model"
    build_sentence_encoder(folder / "model.onnx", random_weights(0, 0.02), BertShape(layers=1, intermediate=64))
    app = await _open(tmp_path / "data", model_cache, model_dir=folder)
    assert app.model_choice is None
    await app.ingest([DOC])
    await app.close()
    _timer(monkeypatch, None)
    with pytest.raises(Unavailable, match="neither installed MiniLM build: set the RETRIEVAL_MODEL_DIR"):
        await _open(tmp_path / "data", model_cache)


async def test_a_cache_folder_that_cannot_be_written_falls_back_to_int8(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_fp32_package()
    timer = _timer(monkeypatch, FP32_FASTER)
    # The cache folder is one (a file there is refused at start-up), but a file holds the place of
    # the folder the model would be built in.
    cache = tmp_path / "cache"
    cache.mkdir()
    model_id = fp32_model_id()
    assert model_id is not None
    digest, graph = model_id.removeprefix("onnx-fp32:").split(".g")
    (cache / f"all-MiniLM-L6-v2-fp32-{digest}-g{graph}").write_text("a file where the model's folder would go")
    app = await _open(tmp_path / "data", cache)
    try:
        assert app.model_choice is not None and app.model_choice.how is How.FP32_UNBUILDABLE
        assert app.model_choice.model is Precision.INT8 and app.embedder.model_id == int8_model().model_id and timer.calls == 0
    finally:
        await app.close()


def _damaged_build(model_cache: Path, cache: Path) -> Path:
    """A copy of the fp32 build cut short at 5 MB in ``cache``, where a start looks for it."""
    built = fp32_model(model_cache)
    assert built is not None
    damaged = cache / built.model_path.relative_to(model_cache)
    damaged.parent.mkdir(parents=True)
    damaged.write_bytes(built.model_path.read_bytes()[:5_000_000])
    return damaged


async def test_a_damaged_fp32_build_is_built_again(tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It was reused by every start, each failing on "cannot load the ONNX model", naming neither the setting nor the fix."""
    _timer(monkeypatch, None)
    damaged = _damaged_build(model_cache, tmp_path / "cache")
    app = await _open(tmp_path / "data", tmp_path / "cache", model="fp32")
    try:
        assert app.embedder.model_id == fp32_model_id()
        assert damaged.read_bytes() == next(model_cache.glob(f"*/{damaged.name}")).read_bytes()
    finally:
        await app.close()


@pytest.mark.parametrize("setting", ["auto", "fp32"])
async def test_a_build_that_cannot_be_loaded_even_built_again_names_the_cache_folder_or_falls_back_to_int8(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch, setting: str,
) -> None:
    timer = _timer(monkeypatch, FP32_FASTER)
    damaged = _damaged_build(model_cache, tmp_path / "cache")
    rebuilt: list[Path] = []

    def build_badly(zip_path: Path, model: Path) -> Path:
        rebuilt.append(model)
        model.write_bytes(b"still not a model")
        return model

    monkeypatch.setattr(minilm_fp32, "build", build_badly)
    if setting == "fp32":
        with pytest.raises(ValueError, match=re.escape(f"the fp32 model built in {tmp_path / 'cache'} (RETRIEVAL_MODEL_CACHE_DIR) cannot be "
                                                       "loaded, even built again: ")):
            await _open(tmp_path / "data", tmp_path / "cache", model=setting)
        assert rebuilt == [damaged]
        return
    app = await _open(tmp_path / "data", tmp_path / "cache", model=setting)
    try:
        assert app.model_choice is not None and app.model_choice.how is How.FP32_UNBUILDABLE and timer.calls == 0
        assert app.embedder.model_id == int8_model().model_id and rebuilt == [damaged]
    finally:
        await app.close()


WAYS_AROUND = {
    "read-only": "set RETRIEVAL_MODEL_CACHE_DIR to a folder this process can write, or RETRIEVAL_MODEL=int8",
    "full": "the folder has no room: free some there, or set RETRIEVAL_MODEL_CACHE_DIR to a folder that has, or RETRIEVAL_MODEL=int8",
    "unreadable weights": None,
}


@pytest.mark.parametrize("failure", WAYS_AROUND)
async def test_a_damaged_build_that_cannot_be_built_again_names_the_cache_folder_and_the_way_around(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch, failure: str,
) -> None:
    """Built again over the damaged one, with RETRIEVAL_MODEL=fp32, the write's raw OSError ("Read-only
    file system" and a temporary file's path) stopped start-up, naming neither the setting nor the fix.
    The fix is the error's: every OSError was told to find a folder this process can write, a full
    one (which it can write) and a weights file in site-packages it cannot read (which no cache
    folder helps) too."""
    _timer(monkeypatch, None)
    damaged = _damaged_build(model_cache, tmp_path / "cache")
    folder = damaged.parent
    if failure == "read-only":
        folder.chmod(0o555)
    make, open_zip = tempfile.mkstemp, minilm_fp32.zipfile.ZipFile
    weights = minilm_fp32._weights_zip()  # noqa: SLF001 - the file the build reads
    assert weights is not None

    def refused(*args: Any, dir: str | None = None, **kwargs: Any) -> tuple[int, str]:
        if dir is not None and Path(dir) == folder:
            if failure == "full":
                raise OSError(errno.ENOSPC, "No space left on device", str(folder))
            # root writes through the mode bits: the folder refuses the build's file itself
            raise OSError(errno.EROFS, "Read-only file system", str(folder))
        return make(*args, dir=dir, **kwargs)

    def unreadable(file: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(file) == weights[0]:
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return open_zip(file, *args, **kwargs)

    if failure == "unreadable weights":
        monkeypatch.setattr(minilm_fp32.zipfile, "ZipFile", unreadable)
    elif failure == "full" or os.geteuid() == 0:
        monkeypatch.setattr(tempfile, "mkstemp", refused)
    try:
        with pytest.raises(ValueError, match=re.escape(f"the fp32 model cannot be built in {tmp_path / 'cache'} (RETRIEVAL_MODEL_CACHE_DIR): ")) as caught:
            await _open(tmp_path / "data", tmp_path / "cache", model="fp32")
        assert damaged.stat().st_size == 5_000_000
    finally:
        folder.chmod(0o755)
    way_around = WAYS_AROUND[failure]
    message = str(caught.value)
    if way_around is None:
        assert message.endswith(f"Permission denied: '{weights[0]}'") and "RETRIEVAL_MODEL_CACHE_DIR to a folder" not in message
    else:
        assert message.endswith(f"; {way_around}")


async def test_workers_of_several_processes_all_take_int8_without_measuring(tmp_path: Path, model_cache: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    timer = _timer(monkeypatch, FP32_FASTER)
    app = await _open(tmp_path / "data", model_cache, processes=2)
    try:
        assert app.model_choice is not None and app.model_choice.how is How.SEVERAL_PROCESSES and timer.calls == 0
        assert app.embedder.model_id == int8_model().model_id
    finally:
        await app.close()


async def test_a_later_start_on_an_empty_index_keeps_the_model_recorded_without_measuring(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pod's workers recorded int8 unmeasured; an `ingest --local` (one process) then starts on
    the same index, still without documents, while the workers may be embedding their first ones."""
    workers = await _open(tmp_path, model_cache, processes=2)
    _timer(monkeypatch, None)  # measuring would fail
    try:
        local = await _open(tmp_path, model_cache, vectors_dir=tmp_path / "vectors-local")
        try:
            assert local.model_choice == workers.model_choice == model_choice.ModelChoice(Precision.INT8, How.SEVERAL_PROCESSES)
            assert local.embedder.model_id == workers.embedder.model_id == int8_model().model_id
        finally:
            await local.close()
        # Forcing the other build is refused, empty or not: the workers would go on writing int8.
        with pytest.raises(Unavailable, match="built with embedding model onnx:.*but onnx-fp32:"):
            await _open(tmp_path, model_cache, model="fp32", vectors_dir=tmp_path / "vectors-forced")
        assert await workers.metadata.get_info("embedding_model") == int8_model().model_id
    finally:
        await workers.close()


async def test_of_two_processes_starting_at_once_on_a_new_index_the_first_recorded_model_wins(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the one-process start times the models (and finds fp32 faster), a two-process pod's
    worker opens the same index and records int8: the one-process start takes int8 too."""
    loop = asyncio.get_running_loop()
    opened: list[Application] = []

    def measure_while_the_workers_start(encoders: Mapping[Precision, Callable[[Sequence[str]], object]], rounds: int = 5) -> Timings:
        # On the inference thread, while the event loop is free: the workers' start runs there meanwhile.
        opened.append(asyncio.run_coroutine_threadsafe(_open(tmp_path, model_cache, processes=2), loop).result())
        return FP32_FASTER

    monkeypatch.setattr(model_choice, "measure", measure_while_the_workers_start)
    local = await _open(tmp_path, model_cache, vectors_dir=tmp_path / "vectors-local")
    (workers,) = opened
    try:
        assert workers.embedder.model_id == local.embedder.model_id == int8_model().model_id
        assert local.model_choice == model_choice.ModelChoice(Precision.INT8, How.SEVERAL_PROCESSES)
        assert local.metadata is not workers.metadata and await local.metadata.get_info("embedding_model") == int8_model().model_id
        await local.ingest([DOC])
        await workers.ingest([dataclasses.replace(DOC, document_id="glaciers-2")])
        assert await workers.metadata.count_documents() == 2
    finally:
        await local.close()
        await workers.close()


async def test_a_process_whose_model_is_not_the_index_s_cannot_write(tmp_path: Path, model_cache: Path) -> None:
    app = await _open(tmp_path, model_cache, model="int8")
    try:
        # Whatever recorded it (a process of an older release, say), it is checked in the write itself.
        await app.metadata.set_info("embedding_model", "onnx:another")
        with pytest.raises(WrongModel, match="records embedding model onnx:another, but this process embeds with onnx:"):
            await app.ingest([DOC])
        assert await app.metadata.count_documents() == 0 and await app.metadata.pending_writes() == []
        assert await app.vectors.count("glaciers") == 0
    finally:
        await app.close()
