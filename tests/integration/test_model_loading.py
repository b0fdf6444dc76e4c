"""A model folder's session is made on a thread of its own while the application imports, is built
and opens its stores; its embedding size, which the stores need first, is learnt once and remembered."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import scoring_core
from retrieval_server import model_loading
from retrieval_server.app import Application
from retrieval_server.backends.embedder import BUNDLED_TOKENIZER, resolve_model
from retrieval_server.backends.model_dims import CACHE_FILE, known_dim, remember_dim
from retrieval_server.backends.vector_store.edge import EdgeVectorStore
from retrieval_server.config import Settings, load_settings
from retrieval_server.domain import DocumentSource, Unavailable
from scoring_core.model_builder import BertShape, build_cross_encoder, build_sentence_encoder, random_weights
from tests.support.paths import REPO, fp32_model_dir, inherited_env

#: 32 dimensions: not MiniLM's 384, so nothing can take the size from the default.
TINY = BertShape(hidden=32, layers=1, heads=2, intermediate=64)
DOC = DocumentSource(filename="fjords.txt", document_id="fjords", content=b"Fjords are valleys carved by glaciers and flooded by the sea.")
#: Failure detection only: a loader that waits this long for the vector store has been serialized behind it.
NEVER_S = 120.0


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tiny-encoder")
    build_sentence_encoder(folder / "model.onnx", random_weights(0, 0.02), TINY)
    return folder


def _settings(tmp_path: Path, model_dir: Path, data: str = "data") -> Settings:
    return load_settings(data_dir=tmp_path / data, model_dir=model_dir, model_cache_dir=tmp_path / "cache", cache_backend="none",
                         metrics_enabled=False, graph_enabled=False)


def _model_id(settings: Settings) -> str:
    """Without making a session: a session's thread would remember the size it learns, racing a hand edit made meanwhile."""
    return resolve_model(settings.model_dir, model_loading.cache_dir(settings)).model_id


async def test_the_size_is_learnt_from_the_first_session_then_known_before_the_next_is_made(tmp_path: Path, model_dir: Path) -> None:
    settings = _settings(tmp_path, model_dir)
    first = model_loading.start(settings)
    assert first is not None and first.files.dim is None
    app = Application(settings, model=first)
    assert first.encoder.done() and app.embedder.dim == 32  # the stores were made with the session's size
    await app.open()
    try:
        report = await app.ingest([DOC])
        assert report.documents[0].child_chunks >= 1
        assert (await app.embedder.embed(["sea"])).shape == (1, 32)
    finally:
        await app.close()
    assert known_dim(first.files.model_id, tmp_path / "cache") == 32
    second = model_loading.start(settings)
    assert second is not None and second.files.dim == 32
    second.encoder.result()


async def test_the_vector_store_opens_while_the_session_is_being_made(tmp_path: Path, model_dir: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(tmp_path, model_dir)
    remember_dim(_model_id(settings), 32, tmp_path / "cache")
    vectors_open = threading.Event()
    real_open, real_encoder = EdgeVectorStore.open, model_loading.new_encoder

    async def open_(self: EdgeVectorStore) -> None:
        await real_open(self)
        vectors_open.set()

    def encoder_after_the_vectors(*args: object, **kwargs: object) -> object:
        # Waits for the vector store: an application that opened it only after the model would never get here in time.
        if not vectors_open.wait(NEVER_S):
            raise AssertionError("the vector store did not open while the model's session was being made")
        return real_encoder(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(EdgeVectorStore, "open", open_)
    monkeypatch.setattr(model_loading, "new_encoder", encoder_after_the_vectors)
    app = Application(settings)  # its size known: made without waiting for the session
    assert app.embedder.model_id != "" and not vectors_open.is_set()
    # A process that ends meanwhile (a start failing) waits for the session instead of ending under it.
    assert [t.daemon for t in threading.enumerate() if t.name == "model-loading"] == [False]
    await app.open()
    try:
        assert vectors_open.is_set()
        assert (await app.embedder.embed(["valley"])).shape == (1, 32)
    finally:
        await app.close()


async def test_a_session_that_cannot_be_made_fails_the_opening_and_leaves_the_folders_usable(tmp_path: Path, model_dir: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not an onnx graph")
    settings = _settings(tmp_path, broken)
    remember_dim(_model_id(settings), 32, tmp_path / "cache")  # so that the failure comes in open(), beside the stores
    app = Application(settings)
    # onnxruntime's error named the file, but not the setting it came from.
    with pytest.raises(ValueError, match=re.escape(f"RETRIEVAL_MODEL_DIR={broken}: cannot load the ONNX model {broken / 'model.onnx'}: ")
                       + ".*INVALID_PROTOBUF"):
        await app.open()
    # Closed on the way out: the same folders open for a working model.
    app = Application(_settings(tmp_path, model_dir))
    await app.open()
    await app.close()


def test_a_tokenizer_that_cannot_be_read_is_refused_naming_the_file_and_the_setting(tmp_path: Path, model_dir: Path) -> None:
    """The tokenizers library said "key must be a string at line 1 column 2", naming neither."""
    folder = tmp_path / "bad-tokenizer"
    folder.mkdir()
    (folder / "model.onnx").write_bytes((model_dir / "model.onnx").read_bytes())
    (folder / "tokenizer.json").write_text("{not json")
    with pytest.raises(ValueError, match=re.escape(f"RETRIEVAL_MODEL_DIR={folder}: cannot read the tokenizer {folder / 'tokenizer.json'}: ")):
        Application(_settings(tmp_path, folder))


def test_a_cross_encoder_folder_is_refused_naming_its_output_and_the_setting(tmp_path: Path) -> None:
    """It served, with an index of 1-dimensional vectors, and every ingest failed on a numpy broadcast error."""
    folder = tmp_path / "cross-encoder"
    build_cross_encoder(folder / "model.onnx", TINY)
    with pytest.raises(ValueError, match=re.escape(f"RETRIEVAL_MODEL_DIR={folder}: {folder / 'model.onnx'} is no sentence encoder: "
                                                   "its output 'logits'")):
        Application(_settings(tmp_path, folder))


def _int32_ids(model: Path, folder: Path) -> Path:
    """``model`` taking its inputs as int32, as some exporters write them."""
    import onnx
    from onnx import TensorProto, helper

    graph = onnx.load(str(model))
    casts = []
    for feed in graph.graph.input:
        feed.type.tensor_type.elem_type = TensorProto.INT32
        for node in graph.graph.node:
            node.input[:] = [f"{x}_int64" if x == feed.name else x for x in node.input]
        casts.append(helper.make_node("Cast", [feed.name], [f"{feed.name}_int64"], to=TensorProto.INT64))
    nodes = [*casts, *graph.graph.node]
    del graph.graph.node[:]
    graph.graph.node.extend(nodes)
    folder.mkdir()
    onnx.save(graph, str(folder / "model.onnx"))
    return folder


@pytest.mark.parametrize("case", ["int32 ids", "ids past the word table", "vocab_size below the tokenizer's"])
def test_a_model_that_cannot_embed_what_its_tokenizer_makes_is_refused_at_start_up(tmp_path: Path, model_dir: Path, case: str) -> None:
    """With a config.json giving max_position_embeddings (and a fixed output size) no text was
    embedded at start-up: the server started, then every embedding failed (ingest FAILED, queries
    without their dense leg) on onnxruntime's "expected: (tensor(int32))" or "Gather ... idx=13523
    must be within [-8000,7999]"."""
    config = {"model_type": "bert", "max_position_embeddings": 512}
    if case == "int32 ids":
        folder = _int32_ids(model_dir / "model.onnx", tmp_path / "int32")
        expected = "tensor(int32)"
    else:
        folder = tmp_path / "small-vocabulary"
        build_sentence_encoder(folder / "model.onnx", random_weights(0, 0.02), BertShape(vocab_size=30000, hidden=32, layers=1, heads=2,
                                                                                       intermediate=64))
        if case == "vocab_size below the tokenizer's":
            config["vocab_size"] = 30000
        expected = ("has 30522 tokens, more than the vocab_size 30000 of " + str(folder / "config.json") if "vocab_size" in config
                    else "idx=30521 must be within the inclusive range [-30000,29999]")
    (folder / "tokenizer.json").write_bytes(BUNDLED_TOKENIZER.read_bytes())
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=re.escape(f"RETRIEVAL_MODEL_DIR={folder}: ")) as refused:
        Application(_settings(tmp_path, folder))
    assert expected in str(refused.value) and str(folder / "tokenizer.json") in str(refused.value)
    if "vocab_size" not in config:
        assert str(folder / "model.onnx") in str(refused.value)


@pytest.mark.parametrize("index", ["new", "built with the right size"])
async def test_a_wrong_remembered_size_is_refused_and_corrected(tmp_path: Path, model_dir: Path, index: str) -> None:
    settings = _settings(tmp_path, model_dir)
    if index != "new":
        app = Application(settings)
        await app.open()
        await app.ingest([DOC])
        await app.close()
    model_id = _model_id(settings)
    remember_dim(model_id, 48, tmp_path / "cache")  # as if edited by hand
    app = Application(settings)
    assert app.embedder.dim == 48
    # Also refused by an existing vector store (48 against its 32): the cause is what is raised.
    with pytest.raises(model_loading.WrongSize, match="embeds in 32 dimensions, but .* remembered 48"):
        await app.open()
    assert json.loads((tmp_path / "cache" / CACHE_FILE).read_text())[model_id] == 32
    app = Application(_settings(tmp_path, model_dir, data="fresh" if index == "new" else "data"))
    await app.open()
    try:
        assert app.embedder.dim == 32
    finally:
        await app.close()


async def test_an_opening_cancelled_while_the_stores_open_closes_them(tmp_path: Path, model_dir: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(tmp_path, model_dir)
    Application(settings)  # learns the size
    opening = asyncio.Event()
    real_open = EdgeVectorStore.open

    async def open_(self: EdgeVectorStore) -> None:
        opening.set()
        await real_open(self)

    monkeypatch.setattr(EdgeVectorStore, "open", open_)
    app = Application(settings)
    task = asyncio.ensure_future(app.open())
    await opening.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    monkeypatch.setattr(EdgeVectorStore, "open", real_open)
    app = Application(settings)  # the engine allows one open per folder: the cancelled one was closed
    await app.open()
    await app.close()


async def test_an_opening_cancelled_while_the_kernels_load_tells_their_warm_up_to_stop(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first start compiles every kernel in one job (about 25 s), which the stop waits for."""
    warming = threading.Event()
    told: list[bool] = []

    def warm_up(stop: threading.Event | None = None) -> None:
        warming.set()
        # The bound only keeps a regression from hanging the test: told, it returns at once.
        told.append(stop is not None and stop.wait(timeout=120))

    monkeypatch.setattr(scoring_core, "warm_up", warm_up)
    app = Application(_settings(tmp_path, model_dir))
    task = asyncio.ensure_future(app.open())
    await asyncio.to_thread(warming.wait)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert told == [True]


def test_a_start_that_fails_while_the_session_is_made_exits_with_its_error(tmp_path: Path) -> None:
    """The session's thread outlives the failure: the process waits for it instead of being torn down
    under it. A real model, whose session takes long enough to be still in the making when the
    start fails (the tiny one is made before: with a daemon thread this passed with it, and aborts with this)."""
    model_dir = fp32_model_dir()
    remember_dim(_model_id(_settings(tmp_path, model_dir)), 384, tmp_path / "cache")
    env = {**inherited_env(), "RETRIEVAL_DATA_DIR": str(tmp_path / "data"), "RETRIEVAL_MODEL_DIR": str(model_dir),
           "RETRIEVAL_MODEL_CACHE_DIR": str(tmp_path / "cache"), "RETRIEVAL_PORT": "0", "RETRIEVAL_METRICS_ENABLED": "false",
           "RETRIEVAL_MIN_FREE_DISK_MB": str(2**30)}  # refused by the first check of open(), long before a session is made
    done = subprocess.run([sys.executable, "-m", "retrieval_server.cli", "serve"], cwd=REPO, env=env, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 1, done.stderr
    assert "free" in done.stderr and "terminate called" not in done.stderr


@pytest.mark.parametrize("backend", ["edge", "qdrant-local"])
async def test_an_index_of_another_size_is_refused_naming_both_sizes(tmp_path: Path, model_dir: Path, backend: str) -> None:
    """The vectors' size is the index's: a model folder of another size cannot open it, its size known beforehand or not."""
    where = {"qdrant_path": str(tmp_path / "qdrant")} if backend == "qdrant-local" else {}
    app = Application(load_settings(data_dir=tmp_path / "data", model_cache_dir=tmp_path / "cache", cache_backend="none",
                                    metrics_enabled=False, graph_enabled=False, **where))
    await app.open()
    await app.ingest([DOC])
    await app.close()
    for _ in range(2):  # the first start learns the size, the second knows it
        app = Application(_settings(tmp_path, model_dir).model_copy(update=where))
        with pytest.raises(Unavailable, match="holds 'dense' vectors of 384 dimensions, but the embedding model makes 32"):
            await app.open()


def test_ingest_local_starts_the_session_before_the_application_imports(tmp_path: Path, model_dir: Path) -> None:
    doc = tmp_path / "fjords.txt"
    doc.write_bytes(DOC.content)
    probe = (
        "import sys\n"
        "from retrieval_server import cli, model_loading\n"
        "real = model_loading.start\n"
        "def start(settings):\n"
        "    print('application imported when the model started:', 'retrieval_server.app' in sys.modules, flush=True)\n"
        "    return real(settings)\n"
        "model_loading.start = start\n"
        "sys.exit(cli.main(['ingest', '--local', '--quiet', sys.argv[1]]))\n"
    )
    env = {**inherited_env(), "RETRIEVAL_DATA_DIR": str(tmp_path / "data"), "RETRIEVAL_MODEL_DIR": str(model_dir),
           "RETRIEVAL_MODEL_CACHE_DIR": str(tmp_path / "cache"), "RETRIEVAL_GRAPH_ENABLED": "false"}
    done = subprocess.run([sys.executable, "-c", probe, str(doc)], cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    # One session, started before the application imported (the application makes none of its own).
    assert [line for line in done.stdout.splitlines() if "when the model started" in line] == [
        "application imported when the model started: False"]
    assert "added     fjords" in done.stdout
