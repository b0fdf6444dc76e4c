"""How an answer's citation markers are read."""

from __future__ import annotations


def test_citations_are_markers_after_a_space_or_a_stop_not_indexes() -> None:
    """``argv[0]`` and ``rows[1][2]`` index something: they were cut from the text and counted as
    citations; a marker right after a word counts only where it ends the sentence. A marker of more than four digits is no citation (one of 4,301 overflowed int()
    into INTERNAL)."""
    from types import SimpleNamespace

    from retrieval_server.workflow.answer import parse_cited

    contexts = [SimpleNamespace()] * 3
    sentences, invalid = parse_cited(
        "The name is in sys.argv[0] [1]. Read rows[1][2] first [2][3]. It holds [" + "9" * 4_400 + "]. Done. [1, 2]", contexts  # type: ignore[arg-type]
    )
    assert [(s.text, s.citations) for s in sentences] == [
        ("The name is in sys.argv[0].", (1,)), ("Read rows[1][2] first.", (2, 3)), ("It holds [" + "9" * 4_400 + "].", ()), ("Done.", (1, 2)),
    ]
    assert invalid == 0
    # Right after a word or a parenthesis, a marker ending its sentence is a citation, as models write them.
    sentences, _ = parse_cited("Billing is owned by Alice Chen[1]. It runs on Postgres (version 15)[2]. Bob leads it[2][3]", contexts)  # type: ignore[arg-type]
    assert [(s.text, s.citations) for s in sentences] == [
        ("Billing is owned by Alice Chen.", (1,)), ("It runs on Postgres (version 15).", (2,)), ("Bob leads it", (2, 3)),
    ]
    sentences, _ = parse_cited("Stored in sys.argv[1] when present [1]. Then x[0].", contexts)  # type: ignore[arg-type]
    assert [(s.text, s.citations) for s in sentences] == [("Stored in sys.argv[1] when present.", (1,)), ("Then x[0].", ())]
