"""Which degradations keep an answer's contexts out of the semantic cache."""

from __future__ import annotations

import pytest

from retrieval_server.workflow.nodes import _transient, describes_answer


@pytest.mark.parametrize("tag", [
    "dense:store_error", "dense:embedding_failed", "rerank:failed", "rerank:tei_failed_used_local",
    "analysis:rewrite:timeout", "analysis:hyde:llm_failed_used_classical (LlmError)", "analysis:decompose:timeout (total)",
    "deadline:partial_results", "deadline:metadata_skipped", "deadline:rerank_capped", "deadline:rerank_skipped",
    # cut at the reranker's measured rate, which follows the machine's load
    "rerank:budget",
])
def test_a_passing_failure_or_load_that_shaped_the_contexts_keeps_them_out(tag: str) -> None:
    # Nor does an answer served before the workflow (served_answers) keep it.
    assert _transient(tag) and not describes_answer(tag)


@pytest.mark.parametrize("tag", [
    # GENERATION's stages around the cache shape the answer written for the request, not the contexts
    "router:llm_failed_used_rules", "tool:summarize:timeout", "tool:calculate:failed", "answer:llm_failed_used_extractive",
    # the server's configuration, not a failure
    "rerank:unavailable", "analysis:hyde:skipped: needs an LLM",
])
def test_what_does_not_shape_the_cached_contexts_lets_them_in(tag: str) -> None:
    assert not _transient(tag)
