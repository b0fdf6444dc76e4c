"""analyze_dependencies' cycle search: every short cycle once, those through the entity first, within a budget of steps."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval_server.workflow.cycles import bounded_cycles


def _canonical(cycle: list[str]) -> tuple[str, ...]:
    i = cycle.index(min(cycle))
    return tuple(cycle[i:] + cycle[:i])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=30), st.integers(1, 6))
def test_every_short_cycle_is_found_once_as_networkx_finds_them(edges: list[tuple[int, int]], max_length: int) -> None:
    g = nx.DiGraph((f"n{a}", f"n{b}") for a, b in edges if a != b)
    nodes = list(g.nodes)
    found, complete = bounded_cycles(nodes, {n: list(g.successors(n)) for n in nodes}, max_length, max_cycles=10**6)
    expected = {_canonical(c) for c in nx.simple_cycles(g, length_bound=max_length)}
    assert complete and len(found) == len(expected) and {_canonical(c) for c in found} == expected


def test_the_shortest_cycles_come_first_those_through_the_entity_first_among_them() -> None:
    successors = {"x": ["a", "c"], "a": ["b", "x"], "b": ["a"], "c": ["d"], "d": ["x", "c"]}
    found, complete = bounded_cycles(["x", "c", "d", "a", "b"], successors, 3)
    assert complete and found == [["x", "a"], ["c", "d"], ["a", "b"], ["x", "c", "d"]]
    first, complete = bounded_cycles(["x", "c", "d", "a", "b"], successors, 3, max_cycles=1)
    assert first == [["x", "a"]] and not complete


def test_a_short_cycle_through_the_entity_is_found_behind_a_large_component() -> None:
    """Depth first to the longest at once, the budget went below the entity's first dependencies
    (a ring without short cycles) and never reached x -> a -> x."""
    n, k = 160, 20
    successors: dict[str, list[str]] = {f"s{i}": [f"s{(i + j) % n}" for j in range(1, k + 1)] for i in range(n)}
    successors["x"] = [f"s{i}" for i in range(19)] + ["a"]
    successors["a"] = ["x"]
    found, complete = bounded_cycles(["x", *[f"s{i}" for i in range(n)], "a"], successors, 6, max_steps=10_000)
    assert found == [["x", "a"]] and not complete


def test_a_large_component_without_a_short_cycle_stops_at_the_budget() -> None:
    """A ring of 160 services, each depending on the next 20: every cycle is 8 long or more, and a
    search bound to 6 looked through the whole component (networkx: 6 s on the event loop)."""
    n, k = 160, 20
    successors = {f"s{i}": [f"s{(i + j) % n}" for j in range(1, k + 1)] for i in range(n)}
    found, complete = bounded_cycles(list(successors), successors, 6, max_steps=10_000)
    assert found == [] and not complete
