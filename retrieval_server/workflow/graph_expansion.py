"""The graph leg: chunks reached from the entities a query names, over up to two hops.

Every reached entity has a strength. A seed's is its match score times the hop-0 penalty; an
entity first reached at hop h takes the best of its neighbours' strengths, times the weight of
the edge (capped at 1: one stated relation, or four co-occurrences, is a full edge), times
``penalty[h] / penalty[h - 1]``, so a chain of full edges scores exactly the hop penalty
(reference: 1.0, 0.77, 0.63). Each hop keeps the ``max_neighbors`` strongest new entities.

Hop h contributes the chunks that mention its entities and were not reached before, at most
``max_chunks_per_hop`` of them. A chunk scores the strength of the strongest reached entity it
mentions; ties go to the chunk that names those strongest entities most often (a service's own
page before a page that mentions it once), then to the one that names more reached entities.

Not a hot loop (a few hundred entities and chunks at most), so plain Python in the workflow.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from retrieval_server.domain import AccessFilter, Strategy, VectorHit
from retrieval_server.knowledge import EntityMatch, GraphHop, GraphTrace, RelationType
from retrieval_server.workflow.knowledge_graph import KnowledgeGraph
from retrieval_server.workflow.state import QueryState, WorkflowDeps


@dataclass(frozen=True, slots=True)
class ExpansionLimits:
    hop_penalties: tuple[float, ...] = (1.0, 0.77, 0.63)
    max_chunks_per_hop: int = 20
    max_neighbors: int = 25


async def expand(
    graph: KnowledgeGraph,
    seeds: Sequence[EntityMatch],
    access: AccessFilter,
    document_ids: Sequence[str],
    limits: ExpansionLimits,
) -> tuple[list[tuple[str, float]], GraphTrace]:
    """``([(chunk_id, score)] best first, trace)``."""
    penalties = limits.hop_penalties
    strength: dict[str, float] = {}
    for m in seeds:
        strength[m.key] = max(strength.get(m.key, 0.0), m.score * penalties[0])
    names = {m.key: m.name for m in seeds}
    frontier = sorted(strength, key=lambda k: (-strength[k], k))
    mentions: dict[str, dict[str, int]] = defaultdict(dict)
    reached: dict[str, int] = {}
    hops: list[GraphHop] = []
    for hop, penalty in enumerate(penalties):
        if hop > 0:
            step = penalty / penalties[hop - 1]
            current = set(frontier)
            candidates: dict[str, float] = {}
            for source, target, weight in await graph.edge_weights(frontier, access, document_ids):
                for a, b in ((source, target), (target, source)):
                    if a in current and b not in strength:
                        s = strength[a] * min(1.0, weight) * step
                        candidates[b] = max(candidates.get(b, 0.0), s)
            frontier = sorted(candidates, key=lambda k: (-candidates[k], k))[: limits.max_neighbors]
            if not frontier:
                break
            for k in frontier:
                strength[k] = candidates[k]
            names.update(await graph.names(frontier, access, document_ids))
        found = await graph.chunks(frontier, access, document_ids, per_entity=limits.max_chunks_per_hop)
        for key, chunks in found.items():
            for c, n in chunks:
                mentions[c][key] = n
        new = {c for chunks in found.values() for c, _ in chunks if c not in reached}
        ranked = sorted(new, key=lambda c: _rank(c, mentions, strength))[: limits.max_chunks_per_hop]
        reached.update((c, hop) for c in ranked)
        hops.append(GraphHop(hop, penalty, tuple(names.get(k, k) for k in frontier), len(ranked)))
    scored = sorted(reached, key=lambda c: _rank(c, mentions, strength))
    return [(c, max(strength[k] for k in mentions[c])) for c in scored], GraphTrace(tuple(seeds), tuple(hops))


def _rank(chunk_id: str, mentions: dict[str, dict[str, int]], strength: dict[str, float]) -> tuple[float, int, float, str]:
    named = mentions[chunk_id]
    best = max(strength[k] for k in named)
    return (-best, -sum(n for k, n in named.items() if strength[k] == best), -sum(strength[k] for k in named), chunk_id)


async def _stated(graph: KnowledgeGraph, matches: Sequence[EntityMatch], state: QueryState) -> list[EntityMatch]:
    """The matches with at least one stated (typed) relation.

    Inside HYBRID and ADAPTIVE the leg follows what the documents state: an entity that only
    co-occurs with others (an acronym in scientific abstracts, say) gives no path worth a leg of
    its own beside dense and keyword search. GRAPH, asked for explicitly, expands them all.
    """
    o = state.options
    typed = [r for r in RelationType if r is not RelationType.CO_OCCURS]
    related = await graph.related([m.key for m in matches], state.point_filter.access, o.document_ids, typed)
    return [m for m in matches if m.key in related]


def uses_graph(state: QueryState, deps: WorkflowDeps) -> bool:
    """GRAPH runs the leg alone; HYBRID and ADAPTIVE add it (empty unless the query names a known entity
    with a stated relation)."""
    if deps.graph is None:
        return False
    return state.strategy is Strategy.GRAPH or (
        deps.settings.graph_expansion and state.options.strategy in (Strategy.HYBRID, Strategy.ADAPTIVE)
    )


async def graph_leg(state: QueryState, deps: WorkflowDeps) -> tuple[list[VectorHit], list[EntityMatch], GraphTrace]:
    """The leg's ranked chunks under the request's access filter, the entities it started from, and its trace."""
    assert deps.graph is not None
    o, s = state.options, deps.settings
    # Read before the matches: a change after it makes the answer stale, not current. Matches the
    # router or an earlier pass read are as old as the version read before them.
    matches, version = state.entity_matches, state.entity_matches_version
    if matches is None:
        version = await deps.graph.version()
        matches = await deps.graph.match(o.query, state.point_filter.access, o.document_ids)
    if not matches:
        return [], matches, GraphTrace(graph_version=version)
    seeds = matches if state.strategy is Strategy.GRAPH else await _stated(deps.graph, matches, state)
    if not seeds:
        # Its matches are reported, and with a cached answer reported again: read at this version.
        return [], matches, GraphTrace(tuple(matches), graph_version=version)
    # Not widened with a retry's pool: GRAPH_MAX_CHUNKS_PER_HOP is what a hop adds at most, as
    # documented, and it bounds the rows the leg reads for each entity.
    limits = ExpansionLimits(s.graph_hop_penalties, s.graph_max_chunks_per_hop, s.graph_max_neighbors)
    scored, trace = await expand(deps.graph, seeds, state.point_filter.access, o.document_ids, limits)
    score_of = dict(scored)
    hits = await deps.vectors.get_chunks([c for c, _ in scored])
    return [h.scored(score_of[h.chunk_id]) for h in hits], matches, replace(trace, graph_version=version)
