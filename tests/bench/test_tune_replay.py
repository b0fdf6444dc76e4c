"""bench.quality's replays score what the service would answer; its indexes keep their folders apart."""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace

from bench.quality import tune
from retrieval_server.domain import VectorHit
from retrieval_server.workflow.adaptive import QueryFeatures
from retrieval_server.workflow.state import WorkflowSettings


@dataclasses.dataclass
class _Deps:
    settings: WorkflowSettings


def _hit(doc: str, score: float) -> VectorHit:
    return VectorHit(f"{doc}#p0c0", f"{doc}#p0", doc, 0, 0, "", 1, score)


def _replay(legs: dict[str, list[VectorHit]], qrels: dict[str, int], settings: WorkflowSettings, parent: str) -> float:
    app = SimpleNamespace(pipeline=SimpleNamespace(deps=_Deps(settings)))
    retrieved = {"q": tune.Retrieved(QueryFeatures(3, 0.0, 0.0, 0.0), legs, "some short query")}
    run = asyncio.run(tune._run(app, retrieved, rrf_k=settings.rrf_k, parent=parent, keyword="keyword", policy=None))  # type: ignore[arg-type]
    return tune.score({"q": qrels}, run)


def test_the_parent_leg_is_folded_into_the_dense_leg_as_the_service_does() -> None:
    settings = WorkflowSettings()
    assert settings.parent_leg and settings.dense_fusion == "max_cosine"
    # c's parent is the best cosine of any granularity: CombMAX puts it first in the dense leg,
    # and first overall; two RRF legs sharing the dense weight put b (dense 2nd, keyword 1st) first.
    legs = {
        "dense:0": [_hit("a", 0.60), _hit("b", 0.55)],
        "parent:0": [_hit("c", 0.70), _hit("a", 0.50)],
        "keyword:0": [_hit("b", 9.0), _hit("c", 8.0)],
        "keyword-plain:0": [_hit("a", 9.0)],
    }
    assert _replay(legs, {"c": 1}, settings, "on") == 1.0
    # Without the parent leg, the children's and the keyword leg's order: b first.
    assert _replay(legs, {"b": 1}, settings, "off") == 1.0


def test_equal_fused_scores_keep_the_fusions_order_not_the_evaluators() -> None:
    settings = dataclasses.replace(WorkflowSettings(), parent_leg=False)
    # First in one leg each: the same RRF score. The fusion keeps doc-a (the first leg's) first;
    # scored by fused score, the evaluator would break the tie by document id, doc-z first.
    legs = {"dense:0": [_hit("doc-a", 0.9), _hit("doc-c", 0.8)], "keyword:0": [_hit("doc-z", 12.0), _hit("doc-d", 11.0)]}
    assert _replay(legs, {"doc-a": 1}, settings, "off") == 1.0


def test_an_index_built_another_way_has_a_folder_of_its_own() -> None:
    from pathlib import Path

    from bench.beir import BeirDataset
    from bench.quality import index

    scifact = BeirDataset(Path("/data/scifact"))
    default = index.default_index_dir(scifact)
    # The default spelled out, or left unset, is the default index.
    assert index.default_index_dir(scifact, "", index.index_settings({}, {})) == default
    assert index.default_index_dir(scifact, "", index.index_settings({}, {"RETRIEVAL_PARENT_LEG": "true"})) == default
    off = index.default_index_dir(scifact, "", index.index_settings({}, {"RETRIEVAL_PARENT_LEG": "false"}))
    titled = index.default_index_dir(scifact, "", index.index_settings({"RETRIEVAL_CHILD_TITLE": "true"}, {}))
    assert len({default, off, titled}) == 3 and off.parent == default.parent
