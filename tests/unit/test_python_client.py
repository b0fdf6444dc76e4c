"""The Python client's helpers that build requests and print responses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retrieval_client import document_from_file, pb, to_json


@pytest.mark.parametrize(("written", "access"), [("public", pb.ACCESS_PUBLIC), ("Private", pb.ACCESS_PRIVATE), ("PRIVATE", pb.ACCESS_PRIVATE)])
def test_a_file_is_public_or_private_as_asked(tmp_path: Path, written: str, access: int) -> None:
    (tmp_path / "a.txt").write_text("Aardvarks dig.")
    assert document_from_file(tmp_path / "a.txt", access=written, owner_id="alice").access == access


@pytest.mark.parametrize("written", ["privat", "restricted", "PRIVATE ", ""])
def test_an_access_level_that_is_none_of_them_is_refused_not_public(tmp_path: Path, written: str) -> None:
    """A typo made the document readable by everyone."""
    (tmp_path / "a.txt").write_text("Aardvarks dig.")
    with pytest.raises(ValueError, match="access must be one of public, private"):
        document_from_file(tmp_path / "a.txt", access=written)


def test_json_keeps_fields_whose_value_is_zero() -> None:
    """A first chunk's chunk_index (0), and an empty list of results, were left out."""
    first = json.loads(to_json(pb.SearchResponse(results=[pb.SearchResult(document_id="d", chunk_index=0)])))
    assert first["results"][0]["chunk_index"] == 0 and first["results"][0]["document_id"] == "d"
    assert json.loads(to_json(pb.SearchResponse()))["results"] == []
