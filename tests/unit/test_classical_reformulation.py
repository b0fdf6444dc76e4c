"""Pseudo-relevance feedback without an LLM: the terms the first pass's results share."""

from __future__ import annotations

import asyncio

from retrieval_server.workflow.analysis import ClassicalAnalyzer


def test_feedback_terms_keep_letters_of_any_script() -> None:
    feedback = [
        "β-amyloid plaques in Sjögren syndrome patients",
        "β-amyloid deposits and Sjögren syndrome in older patients",
        "Sjögren syndrome and β-amyloid: a cohort",
    ]
    variants = asyncio.run(ClassicalAnalyzer(variants=1).reformulate("plaques in older adults", feedback))
    terms = variants[0].removeprefix("plaques in older adults ").split()
    # Cut at the first letter beyond ASCII, these were "amyloid" and "gren": words no document uses.
    assert set(terms) <= {"β-amyloid", "sjögren", "syndrome", "patients"} and len(terms) == 2, variants
