"""The contract passes `buf lint` and `buf breaking`, and both checks catch what they are for."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.contract.toolchain import buf
from tests.support.paths import REPO

PROTO = Path("protos/retrieval/v1/retrieval.proto")
PROTO_GLOB = ":(glob)protos/**/*.proto"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True, timeout=300).stdout.strip()


def _copy_contract(tmp: Path) -> Path:
    """buf.yaml and protos/ in a scratch folder, for edits that must fail the checks."""
    shutil.copy(REPO / "buf.yaml", tmp / "buf.yaml")
    shutil.copytree(REPO / "protos", tmp / "protos", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return tmp / PROTO


def test_contract_passes_buf_lint() -> None:
    result = buf("lint")
    assert result.returncode == 0, result.stdout + result.stderr


def test_lint_flags_an_undocumented_field_and_an_unprefixed_enum_value(tmp_path: Path) -> None:
    proto = _copy_contract(tmp_path)
    text = proto.read_text()
    text = text.replace("message HealthRequest {}", "message HealthRequest {\n  string probe = 1;\n}")
    text = text.replace("  SERVING_STATUS_NOT_SERVING = 3;", "  SERVING_STATUS_NOT_SERVING = 3;\n  // Unknown.\n  UNKNOWN = 9;")
    proto.write_text(text)
    result = buf("lint", cwd=tmp_path)
    assert result.returncode != 0
    assert 'Field "probe" should have a non-empty comment' in result.stdout
    assert 'Enum value name "UNKNOWN" should be prefixed with "SERVING_STATUS_"' in result.stdout


def _ensure_history() -> None:
    """A shallow clone lacks the commits the baseline comes from: fetch them, or fail saying so."""
    if git("rev-parse", "--is-shallow-repository") != "true":
        return
    fetched = subprocess.run(["git", "fetch", "--quiet", "--unshallow", "--tags"], cwd=REPO, capture_output=True, text=True, timeout=300)
    if fetched.returncode != 0:
        pytest.fail(
            "this is a shallow clone and its history could not be fetched, so the contract has no baseline to be "
            f"compared with; clone with full history (git fetch --unshallow --tags):\n{fetched.stderr}"
        )


def contract_baseline() -> tuple[str, str]:
    """The commit the contract must stay compatible with, and why that one.

    The newest release tag (v*) reachable from HEAD; without one, the contract as it was before its
    latest change: HEAD when the working tree changes it, else the first parent of the newest commit
    (on the first-parent line, so a merge counts as one change) that changed a .proto file.
    """
    _ensure_history()
    tags = git("tag", "--merged", "HEAD", "--list", "v*", "--sort=-version:refname").split()
    if tags:
        return tags[0], f"release tag {tags[0]}"
    if git("status", "--porcelain", "--", PROTO_GLOB):
        return "HEAD", "HEAD (the working tree changes the contract)"
    last = git("log", "--first-parent", "-1", "--format=%H", "--", PROTO_GLOB)
    assert last, "no commit holds a .proto file"
    parent = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{last}^"], cwd=REPO, capture_output=True, text=True)
    assert parent.returncode == 0, f"{last[:12]} created the contract: nothing earlier to compare with"
    return parent.stdout.strip(), f"{last[:12]}^, before the newest contract change"


def _extract_protos(ref: str, dest: Path) -> Path:
    for name in git("ls-tree", "-r", "--name-only", ref, "--", "protos").splitlines():
        if name.endswith(".proto"):
            out = dest / name
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(subprocess.run(["git", "show", f"{ref}:{name}"], cwd=REPO, capture_output=True, check=True, timeout=300).stdout)
    return dest / "protos"


def test_contract_is_compatible_with_its_baseline(tmp_path: Path) -> None:
    ref, why = contract_baseline()
    against = _extract_protos(ref, tmp_path)
    assert (against / PROTO.relative_to("protos")).is_file(), f"no contract at {why}"
    result = buf("breaking", "--against", str(against))
    assert result.returncode == 0, f"incompatible with {why}:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize(
    ("old", "new", "finding"),
    [
        # Wire: a field number changes.
        ("  string query = 1;\n  // How many results", "  string query = 9;\n  // How many results", "deleted"),
        # JSON only: a field renamed keeps its number, but grpcurl and JSON callers send the old name.
        ("  int32 top_k = 2;\n}\n\n// One Search hit", "  int32 limit = 2;\n}\n\n// One Search hit", 'changed name from "top_k" to "limit"'),
    ],
    ids=["field-number", "json-name"],
)
def test_breaking_flags_incompatible_changes(tmp_path: Path, old: str, new: str, finding: str) -> None:
    proto = _copy_contract(tmp_path)
    text = proto.read_text()
    assert text.count(old) == 1
    proto.write_text(text.replace(old, new))
    result = buf("breaking", "--against", str(REPO / "protos"), cwd=tmp_path)
    assert result.returncode != 0
    assert finding in result.stdout and "SearchRequest" in result.stdout, result.stdout
