"""A long query's windows: when a query is cut, and how its windows' searches fold into the dense leg."""

from __future__ import annotations

import dataclasses

import pytest

from retrieval_server.app import Application
from retrieval_server.backends.embedder import BUNDLED_TOKENIZER
from retrieval_server.config import load_settings
from retrieval_server.domain import Fusion, VectorHit
from retrieval_server.ingest.chunker import Chunker, ChunkSizes
from retrieval_server.workflow import query_windows
from retrieval_server.workflow.rank_fusion import fuse_lists
from retrieval_server.workflow.state import WorkflowDeps, WorkflowSettings

CHUNKER = Chunker(str(BUNDLED_TOKENIZER), ChunkSizes())


def _hit(chunk: str, score: float = 0.0) -> VectorHit:
    doc, rest = chunk.split("#")
    return VectorHit(chunk, f"{doc}#{rest.split('c')[0]}", doc, 0, 0, chunk, 0, score)


def _deps(**settings: object) -> WorkflowDeps:
    return WorkflowDeps(embedder=None, sparse=None, vectors=None, metadata=None, analyzer=None,  # type: ignore[arg-type]
                        settings=dataclasses.replace(WorkflowSettings(), **settings), query_windows=CHUNKER.child_texts)


def test_only_a_query_longer_than_a_child_is_cut_and_into_the_childrens_windows() -> None:
    long = ". ".join(f"Sentence {i} speaks of ledgers, harbours and the tides of trade" for i in range(30))
    cut = query_windows.cut(long, _deps())
    assert len(cut) > 1 and cut == [c.content for c in CHUNKER.chunk("text", [(1, long)])[1]]
    assert query_windows.cut(long, dataclasses.replace(_deps(), query_windows=None)) == []
    # One window: the text fits in a child, and is searched whole, as before.
    fits = " ".join(["harbour"] * 100)
    assert len(CHUNKER.child_texts(fits)) == 1 and query_windows.cut(fits, _deps()) == []
    # No more ASCII characters than a child has tokens: not even tokenized.
    called: list[str] = []
    short = dataclasses.replace(_deps(), query_windows=lambda t: called.append(t) or [t, t])
    assert query_windows.cut("x" * 128, short) == [] and called == []
    assert query_windows.cut("x " * 65, short) == ["x " * 65] * 2 and called == ["x " * 65]
    # Fewer characters than a child has tokens, more tokens: a Hangul syllable is two or three.
    hangul = "검색된 문서만을 근거로 답하세요. " * 6
    assert len(hangul) < 128 < CHUNKER.count(hangul) and len(query_windows.cut(hangul, _deps())) > 1


def test_the_windows_and_the_whole_query_fold_into_one_dense_leg_fused_per_parent() -> None:
    whole = [_hit("a#p0c0", 0.7), _hit("b#p0c0", 0.6)]
    first, second = [_hit("b#p0c1", 0.8), _hit("a#p0c0", 0.5)], [_hit("b#p0c2", 0.9)]
    keyword = [_hit("c#p0c0", 12.0)]
    legs = [("keyword:0", keyword), ("dense:0", whole), ("window:0", first), ("window:1", second)]
    folded = query_windows.fold(legs, WorkflowSettings(), 100)
    assert [leg for leg, _ in folded] == ["keyword:0", "dense:0"] and folded[0][1] is keyword
    expected = fuse_lists([whole, first, second], [1.0, 1.0, 1.0], WorkflowSettings(), Fusion.RRF, 100, by_parent=True)
    assert folded[1][1] == expected
    # b#p0 is first in two lists (its children c1, c2) and second in one: it passes a#p0.
    assert folded[1][1][0].parent_chunk_id == "b#p0" and folded[1][1][0].score == pytest.approx(2 / 11 + 1 / 12)
    plain = [("dense:0", whole), ("keyword:0", keyword)]
    assert query_windows.fold(plain, WorkflowSettings(), 100) is plain
    # Without the whole query's list (its search failed) the windows still make the dense leg.
    assert [leg for leg, _ in query_windows.fold([("window:0", first), ("keyword:0", keyword)], WorkflowSettings(), 100)] == ["dense:0", "keyword:0"]


def test_a_huge_query_is_searched_in_its_first_windows_only() -> None:
    huge = " ".join(f"Paragraph {i} recounts the harbour ledgers of the northern trading towns." for i in range(800))
    assert len(huge.encode()) > 50_000 and len(CHUNKER.child_texts(huge)) > 100
    cut = query_windows.cut(huge, _deps())
    assert cut == CHUNKER.child_texts(huge)[:8]
    assert len(query_windows.cut(huge, _deps(query_max_windows=3))) == 3


def test_the_settings_reach_the_workflow() -> None:
    mapped = Application.workflow_settings(load_settings(long_query_windows=False, query_max_windows=3))
    assert (mapped.long_query_windows, mapped.query_max_windows) == (False, 3)
    assert Application.workflow_settings(load_settings()).long_query_windows
