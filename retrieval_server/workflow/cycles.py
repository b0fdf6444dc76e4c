"""Dependency cycles around an entity, shortest first, found within a budget of steps.

analyze_dependencies lists the cycles of the graph it explored (at most 500 entities). networkx's
``simple_cycles`` with a length bound looked through a whole strongly connected component that
held no short cycle: a ring of 160 services, each depending on the next 20, took 6 s, one of 250
more than 5 minutes, on the event loop, where the tool's timeout cannot stop it. The search here
follows at most :data:`MAX_STEPS` edges and says whether it looked everywhere. It looks for the
cycles of each length in turn, from the shortest: depth first to the longest at once, a budget
spent below the entity's first dependencies missed a cycle of two through its last one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: edges followed at most: a few tenths of a second of Python
MAX_STEPS = 100_000
#: cycles listed at most
MAX_CYCLES = 20


def bounded_cycles(
    nodes: Sequence[str], successors: Mapping[str, Sequence[str]], max_length: int,
    max_cycles: int = MAX_CYCLES, max_steps: int = MAX_STEPS,
) -> tuple[list[list[str]], bool]:
    """The simple cycles of at most ``max_length`` nodes, each once, shortest first, and among
    those of one length as met from their first node in ``nodes``' order (so those through
    ``nodes[0]``, the entity asked about, first); and whether the search was complete: False when
    it stopped at ``max_cycles`` or ``max_steps``."""
    rank = {n: i for i, n in enumerate(nodes)}
    cycles: list[list[str]] = []
    steps = 0
    for length in range(1, max_length + 1):
        for start in nodes:
            # A cycle is found from its lowest-ranked node only: the path keeps to higher ranks.
            low = rank[start]
            path, on_path = [start], {start}
            stack = [iter(successors.get(start, ()))]
            while stack:
                nxt = next(stack[-1], None)
                if nxt is None:
                    stack.pop()
                    on_path.discard(path.pop())
                    continue
                steps += 1
                if steps > max_steps:
                    return cycles, False
                if nxt == start:
                    if len(path) == length:
                        cycles.append(list(path))
                        if len(cycles) >= max_cycles:
                            return cycles, False
                elif rank.get(nxt, -1) > low and nxt not in on_path and len(path) < length:
                    path.append(nxt)
                    on_path.add(nxt)
                    stack.append(iter(successors.get(nxt, ())))
    return cycles, True
