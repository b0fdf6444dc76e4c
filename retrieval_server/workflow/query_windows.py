"""Long queries searched window by window, as documents are indexed.

Documents are cut into child chunks of 128 tokens, and one embedding of a long query is one
point far from each of them: the model averages a 200-word question into a vector that no
128-token passage lies near, and it reads only the first 256 tokens. A query longer than a
child is therefore also cut into the children the indexer would make of it
(``LONG_QUERY_WINDOWS``); each window is embedded and searched as a dense leg of its own, and
those searches and the whole query's are fused per parent (RRF): a parent whose children match
several parts of the query ranks high in several lists. The result replaces the dense leg, so
SEMANTIC is that fused list and HYBRID weighs it as its one dense leg. On pydoc-long it lifts
SEMANTIC on long queries by 0.05 (tuning split) and 0.03 (test split); no shorter query is
touched (README, "Sixth round").
"""

from __future__ import annotations

from retrieval_server.domain import Fusion, VectorHit
from retrieval_server.workflow.state import WorkflowDeps, WorkflowSettings
from retrieval_server.workflow.rank_fusion import fuse_lists

#: the leg kind of a window's search: "window:0", "window:1", ...
KIND = "window"
#: characters a token spans, generously (about twice English's average): a query is cut from a
#: prefix that holds its first windows whole, so a 64 KiB query is not tokenized to its end
_CHARS_PER_TOKEN = 8


def cut(text: str, deps: WorkflowDeps) -> list[str]:
    """``text``'s first ``query_max_windows`` child-sized windows when it is longer than a child
    chunk (the indexer would cut it into several children), else none."""
    s = deps.settings
    if deps.query_windows is None or (text.isascii() and len(text) <= s.child_chunk_tokens):
        # An ASCII character is at most one token: no longer an ASCII text fits in one child. Not
        # so elsewhere (a Hangul syllable is two or three tokens): other text is cut to tell.
        return []
    windows = deps.query_windows(text[: s.query_max_windows * s.child_chunk_tokens * _CHARS_PER_TOKEN])
    return windows[: s.query_max_windows] if len(windows) > 1 else []


def fold(legs: list[tuple[str, list[VectorHit]]], settings: WorkflowSettings, limit: int) -> list[tuple[str, list[VectorHit]]]:
    """``legs`` with the windows' searches and the whole query's (``dense:0``) fused per parent into
    the one ``dense:0`` leg, in the place of the first of them; unchanged without windows."""
    parts = [leg for leg, _ in legs if leg == "dense:0" or leg.startswith(f"{KIND}:")]
    if not any(leg.startswith(f"{KIND}:") for leg in parts):
        return legs
    lists = [hits for leg, hits in legs if leg in parts]
    dense = fuse_lists(lists, [1.0] * len(lists), settings, Fusion.RRF, limit, by_parent=True)
    out = [(leg, hits) for leg, hits in legs if leg not in parts]
    out.insert(next(i for i, (leg, _) in enumerate(legs) if leg in parts), ("dense:0", dense))
    return out
