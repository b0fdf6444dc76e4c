"""Query analysis through each LLM wire protocol, against local servers that speak it."""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import logging
import threading
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from retrieval_server.app import Application
from retrieval_server.backends.circuit_breaker import CircuitBreaker
from retrieval_server.backends.http_body import MAX_RESPONSE_BYTES, ResponseRefused, body_chunks
from retrieval_server.backends.llm import AnthropicChat, Completion, GeminiChat, LlmError, LlmRefused, OpenAICompatibleChat, retry_after_seconds
from retrieval_server.config import load_settings
from retrieval_server.domain import DocumentSource, QueryOptions
from retrieval_server.observability.log_limit import LogLimit
from retrieval_server.workflow.analysis import ClassicalAnalyzer, LlmAnalyzer, NotApplicable, TechniqueModel, analyze
from tests.support.clock import Clock
from tests.support.http_servers import Followed, Sse, Streamed, Unsized, WithHeaders, json_server
from tests.support.ports import refused_port

QUERY = "How does RRF work and why is reranking slow?"
#: A time limit a local model server meets on a busy machine (where the limit is not what is tested).
LOCAL_S = 60.0


def _answer(prompt: str) -> str:
    """What a well-behaved model would say to each technique's prompt."""
    if prompt.startswith("Rewrite"):
        return "How does reciprocal rank fusion (RRF) work, and why is cross-encoder reranking slow?"
    if prompt.startswith("Write 3"):
        return "1. reciprocal rank fusion (RRF) explained\n2. - combining ranked lists with RRF\n3) why rerankers are slow"
    if prompt.startswith("Write a short passage"):
        return "Reciprocal rank fusion sums 1/(k + rank) over the lists. Cross-encoders score every pair."
    return "How does RRF work?\nWhy is reranking slow?"


def openai_handler(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    assert path == "/v1/chat/completions"
    prompt = body["messages"][1]["content"]
    return 200, {"choices": [{"message": {"role": "assistant", "content": _answer(prompt)}}]}


def anthropic_handler(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    assert path == "/v1/messages"
    return 200, {"content": [{"type": "text", "text": _answer(body["messages"][0]["content"])}], "role": "assistant"}


def gemini_handler(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    assert path.startswith("/v1beta/models/gemini-test:generateContent")
    prompt = body["contents"][0]["parts"][0]["text"]
    return 200, {"candidates": [{"content": {"parts": [{"text": _answer(prompt)}], "role": "model"}}]}


PROTOCOLS: list[tuple[str, Callable[..., Any], Any, str]] = [
    ("openai", OpenAICompatibleChat, openai_handler, "/v1"),
    ("anthropic", AnthropicChat, anthropic_handler, ""),
    ("gemini", GeminiChat, gemini_handler, ""),
]
TEMPS = {"rewrite": 0.3, "reformulate": 0.7, "hyde": 0.5, "decompose": 0.4}


@pytest.mark.parametrize(("name", "cls", "handler", "prefix"), PROTOCOLS, ids=[p[0] for p in PROTOCOLS])
async def test_every_technique_through_the_protocol(name: str, cls: Any, handler: Any, prefix: str) -> None:
    with json_server(handler) as server:
        model = cls(server.url + prefix, "gemini-test" if name == "gemini" else "test-model", "secret-key", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({t: TechniqueModel(model, temp) for t, temp in TEMPS.items()}, ClassicalAnalyzer())
        try:
            a = await analyze(analyzer, QUERY, [], timeout_s=LOCAL_S, total_timeout_s=2 * LOCAL_S)
        finally:
            await model.close()
    assert a.rewritten and "reciprocal rank fusion" in a.rewritten
    assert a.reformulations == ["reciprocal rank fusion (RRF) explained", "combining ranked lists with RRF", "why rerankers are slow"]
    assert a.hyde and a.hyde.startswith("Reciprocal rank fusion")
    assert a.sub_queries == ["How does RRF work?", "Why is reranking slow?"]
    assert a.dropped == {}
    # Per-technique temperature, and the protocol's own auth header.
    temps = sorted(_temperature(name, body) for _, body in server.requests)
    assert temps == sorted(TEMPS.values())
    header = {"openai": ("authorization", "Bearer secret-key"), "anthropic": ("x-api-key", "secret-key"), "gemini": ("x-goog-api-key", "secret-key")}[name]
    assert all(h.get(header[0]) == header[1] for h in server.headers)
    if name == "anthropic":
        assert all(h.get("anthropic-version") == "2023-06-01" for h in server.headers)


def _temperature(name: str, body: dict[str, Any]) -> float:
    return body["generationConfig"]["temperature"] if name == "gemini" else body["temperature"]


async def test_transient_errors_are_retried_with_backoff() -> None:
    calls = {"n": 0}

    def flaky(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        calls["n"] += 1
        if calls["n"] <= 2:
            return 503, {"error": "overloaded"}
        return openai_handler(path, body)

    with json_server(flaky) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=LOCAL_S, max_retries=2, backoff_s=0.01)
        try:
            text = await model.complete("sys", "Rewrite this", temperature=0.3)
        finally:
            await model.close()
    assert "reciprocal rank fusion" in text and calls["n"] == 3


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_a_call_that_let_its_timeout_pass_is_not_sent_again(stream: bool) -> None:
    """Retried as a connection error, a model slower than LLM_TIMEOUT_S was asked max_retries + 1
    times, the caller waiting as many timeouts and each call billed."""
    answer = threading.Event()

    def held(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        answer.wait()
        return openai_handler(path, body)

    with json_server(held) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=0.5, max_retries=2, backoff_s=0)
        try:
            with pytest.raises(LlmError, match="ReadTimeout|no whole response within 0.5 s") as err:
                if stream:
                    _ = [t async for t in model.stream("sys", "Rewrite this", temperature=0.1)]
                else:
                    await model.complete("sys", "Rewrite this", temperature=0.1)
        finally:
            answer.set()
            await model.close()
    assert len(server.requests) == 1, err.value


async def test_client_errors_are_not_retried() -> None:
    with json_server(lambda path, body: (401, {"error": "bad key"})) as server:
        model = AnthropicChat(server.url, "m", "wrong", timeout_s=LOCAL_S, max_retries=3, backoff_s=0.01)
        try:
            with pytest.raises(LlmError, match="401"):
                await model.complete("sys", "Rewrite this", temperature=0.3)
        finally:
            await model.close()
    assert len(server.requests) == 1


async def test_a_key_the_provider_refuses_with_400_counts_against_the_breaker() -> None:
    """Gemini answers a wrong API key with 400 INVALID_ARGUMENT: the provider is unusable, not the
    request, and Health must come to say so."""
    key_invalid = {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
                             "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]}}
    with json_server(lambda path, body: (400, key_invalid)) as server:
        breaker = CircuitBreaker(failure_threshold=1, cooldown_s=60.0, clock=Clock())
        model = GeminiChat(server.url, "m", "wrong", timeout_s=LOCAL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            with pytest.raises(LlmError, match="400") as err:
                await model.complete("sys", "prompt", temperature=0.1)
        finally:
            await model.close()
    assert not isinstance(err.value, LlmRefused) and breaker.is_open


@pytest.mark.parametrize(
    ("reply", "requests"),
    [
        (WithHeaders({"error": {"message": "slow down"}}, {"Retry-After": "0"}), 2),  # come back now: retried
        (WithHeaders({"error": {"message": "slow down"}}, {"Retry-After": "3600"}), 1),  # longer than a call may take
        ({"error": {"code": "insufficient_quota", "message": "check your plan"}}, 1),  # waiting cannot help
    ],
    ids=["retry-after-0", "retry-after-an-hour", "insufficient-quota"],
)
async def test_a_rate_limit_is_retried_only_when_waiting_can_help(reply: Any, requests: int) -> None:
    def handler(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return (429, reply) if len(server.requests) == 1 else openai_handler(path, body)

    with json_server(handler) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=LOCAL_S, max_retries=2, backoff_s=0)
        try:
            if requests == 1:
                with pytest.raises(LlmError, match="429"):
                    await model.complete("sys", "Rewrite this", temperature=0.3)
            else:
                assert await model.complete("sys", "Rewrite this", temperature=0.3)
        finally:
            await model.close()
    assert len(server.requests) == requests


def test_retry_after_is_read_as_seconds_or_an_http_date() -> None:
    soon = email.utils.format_datetime(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=120), usegmt=True)
    waits = {h: retry_after_seconds(h) for h in ("7", "1.5", soon, "Wed, 21 Oct 2015 07:28:00 GMT", "soon", "", None)}
    assert waits["7"] == 7.0 and waits["1.5"] == 1.5
    assert waits[soon] is not None and 100 < waits[soon] <= 120
    assert waits["Wed, 21 Oct 2015 07:28:00 GMT"] == 0.0  # a date past: at once
    assert waits["soon"] is None and waits[""] is None and waits[None] is None


#: why each protocol's model stopped: at max_tokens, by a provider's filter (which can stop it
#: mid-sentence, as max_tokens does), or by itself
_REASONS = {
    "openai": {"limit": "length", "filter": "content_filter", "itself": "stop"},
    "anthropic": {"limit": "max_tokens", "filter": "refusal", "itself": "end_turn"},
    "gemini": {"limit": "MAX_TOKENS", "filter": "SAFETY", "itself": "STOP"},
}


def _stopped(protocol: str, text: str, how: str, stream: bool) -> Any:
    """A response of ``protocol`` with ``text``, saying why the model stopped (``_REASONS``)."""
    reason = _REASONS[protocol][how]
    if protocol == "openai":
        if stream:
            return Sse([(None, json.dumps({"choices": [{"delta": {"content": text}}]})),
                        (None, json.dumps({"choices": [{"delta": {}, "finish_reason": reason}]})), (None, "[DONE]")])
        return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": reason}]}
    if protocol == "anthropic":
        if stream:
            return Sse([("content_block_delta", json.dumps({"type": "content_block_delta", "delta": {"type": "text_delta", "text": text}})),
                        ("message_delta", json.dumps({"type": "message_delta", "delta": {"stop_reason": reason}})),
                        ("message_stop", json.dumps({"type": "message_stop"}))])
        return {"content": [{"type": "text", "text": text}], "stop_reason": reason}
    if stream:  # Gemini's last chunk may carry only the reason
        return Sse([(None, json.dumps({"candidates": [{"content": {"parts": [{"text": text}]}}]})),
                    (None, json.dumps({"candidates": [{"finishReason": reason}]}))])
    return {"candidates": [{"content": {"parts": [{"text": text}]}, "finishReason": reason}]}


@pytest.mark.parametrize("how", ["limit", "filter", "itself"])
@pytest.mark.parametrize(("name", "cls", "prefix"), [(p[0], p[1], p[3]) for p in PROTOCOLS], ids=[p[0] for p in PROTOCOLS])
async def test_a_completion_says_whether_it_was_stopped_short(name: str, cls: Any, prefix: str, how: str) -> None:
    with json_server(lambda path, body: (200, _stopped(name, "It is. It is not", how, bool(body.get("stream")) or "streamGenerateContent" in path))) as server:
        model = cls(server.url + prefix, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            completion = await model.complete("sys", "prompt", temperature=0.1)
            tokens = [t async for t in model.stream("sys", "prompt", temperature=0.1)]
        finally:
            await model.close()
    short = how != "itself"
    assert completion == "It is. It is not" and isinstance(completion, Completion) and completion.truncated is short
    assert "".join(tokens) == "It is. It is not"
    assert any(isinstance(t, Completion) and t.truncated for t in tokens) is short


@pytest.mark.parametrize("reason", ["eos_token", "stop_sequence"])
async def test_tgis_reasons_for_a_whole_text_are_not_a_cut(reason: str) -> None:
    """Hugging Face TGI's OpenAI-compatible API ends a whole answer with these, not "stop"."""
    body = {"choices": [{"message": {"role": "assistant", "content": "It is. It is not"}, "finish_reason": reason}]}
    with json_server(lambda path, _: (200, body)) as server:
        model = OpenAICompatibleChat(server.url, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            completion = await model.complete("sys", "prompt", temperature=0.1)
        finally:
            await model.close()
    assert isinstance(completion, Completion) and not completion.truncated


def _reasoning_model(path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """OpenAI's answers for a reasoning model (o1 to gpt-5): ``max_tokens`` and a temperature other
    than 1 refused with a 400 naming the parameter, as api.openai.com words them."""
    if "max_tokens" in body:
        return 400, {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                          "Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                               "param": "max_tokens", "code": "unsupported_parameter"}}
    if body.get("temperature", 1) != 1:
        return 400, {"error": {"message": f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. "
                                          "Only the default (1) value is supported.", "type": "invalid_request_error",
                               "param": "temperature", "code": "unsupported_value"}}
    if body.get("stream"):
        return 200, Sse([(None, json.dumps({"choices": [{"delta": {"content": "streamed"}, "finish_reason": "stop"}]})), (None, "[DONE]")])
    return 200, {"choices": [{"message": {"role": "assistant", "content": "answered"}, "finish_reason": "stop"}]}


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_a_model_that_refuses_max_tokens_and_a_temperature_is_sent_what_it_takes(stream: bool) -> None:
    """RETRIEVAL_OPENAI_MODEL=o4-mini (or gpt-5) answers, where every call was a 400 and every
    technique fell back to the classical path; after the first call, no call is refused again."""
    breaker = CircuitBreaker(failure_threshold=1, cooldown_s=60.0, clock=Clock())
    with json_server(_reasoning_model) as server:
        model = OpenAICompatibleChat(server.url, "o4-mini", timeout_s=LOCAL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            for _ in range(2):
                if stream:
                    assert "".join([t async for t in model.stream("sys", "prompt", temperature=0.3, max_tokens=64)]) == "streamed"
                else:
                    assert await model.complete("sys", "prompt", temperature=0.3, max_tokens=64) == "answered"
        finally:
            await model.close()
    bodies = [body for _, body in server.requests]
    assert len(bodies) == 4  # the refused max_tokens, the refused temperature, then one call each
    assert bodies[-1]["max_completion_tokens"] == 64 and "max_tokens" not in bodies[-1] and "temperature" not in bodies[-1]
    assert not breaker.is_open


async def test_calls_sent_before_the_first_refusal_came_back_are_sent_again_too() -> None:
    """Analysis asks its four techniques at once, on one client: the calls refused after the first
    refusal taught the client failed, and the techniques fell back to the classical methods."""
    with json_server(_reasoning_model) as server:
        model = OpenAICompatibleChat(server.url, "o4-mini", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            answers = await asyncio.gather(*(model.complete("sys", f"prompt {i}", temperature=0.3) for i in range(4)))
        finally:
            await model.close()
    assert answers == ["answered"] * 4


@pytest.mark.parametrize(
    "refusal",
    [
        {"message": "Invalid value for 'messages'", "type": "invalid_request_error", "param": "messages", "code": None},
        {"message": "max_tokens is too large: 100000. This model supports at most 16384 completion tokens.",
         "type": "invalid_request_error", "param": "max_tokens", "code": "invalid_value"},
    ],
    ids=["another-parameter", "a-value-out-of-range"],
)
async def test_a_refusal_of_another_parameter_or_value_is_not_sent_again(refusal: dict[str, Any]) -> None:
    """Only a parameter the model does not take at all is left out: a 400 naming anything else (the
    messages, a max_tokens over the model's limit) is the request's fault and returned as it was."""
    with json_server(lambda path, body: (400, {"error": refusal})) as server:
        model = OpenAICompatibleChat(server.url, "m", timeout_s=LOCAL_S, max_retries=2, backoff_s=0)
        try:
            with pytest.raises(LlmRefused, match="400"):
                await model.complete("sys", "prompt", temperature=0.3)
        finally:
            await model.close()
    assert len(server.requests) == 1 and server.requests[0][1]["max_tokens"] == 256


async def test_a_gemini_answer_without_content_is_a_failure_as_openais_null_content_is() -> None:
    """Gemini 2.5's thinking can spend maxOutputTokens before any text: the candidate has no parts.
    It raised as an unexpected shape; as no words, analysis took it for "not applicable" and fell
    back to nothing."""
    with json_server(lambda path, body: (200, {"candidates": [{"content": {"role": "model"}, "finishReason": "MAX_TOKENS"}]})) as server:
        model = GeminiChat(server.url, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            with pytest.raises(LlmError, match="the response has no text"):
                await model.complete("sys", "prompt", temperature=0.1)
        finally:
            await model.close()


@pytest.mark.parametrize(("name", "cls", "prefix"), [(p[0], p[1], p[3]) for p in PROTOCOLS], ids=[p[0] for p in PROTOCOLS])
async def test_half_an_emoji_in_a_models_text_becomes_a_replacement_character(name: str, cls: Any, prefix: str) -> None:
    """JSON may spell a lone surrogate ("\\ud83d"), which UTF-8, so protobuf, refuses: Query failed INTERNAL."""
    text = "AuthSvc \ud83d handles login."
    with json_server(lambda path, body: (200, _stopped(name, text, "itself", bool(body.get("stream")) or "streamGenerateContent" in path))) as server:
        model = cls(server.url + prefix, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            completion = await model.complete("sys", "prompt", temperature=0.1)
            streamed = "".join([t async for t in model.stream("sys", "prompt", temperature=0.1)])
        finally:
            await model.close()
    assert completion == streamed == "AuthSvc \ufffd handles login." and isinstance(completion, Completion)


@pytest.mark.parametrize(
    ("name", "cls", "reply", "outcome"),
    [
        # A finish reason that is no string was looked up in a set: TypeError (unhashable)
        ("openai", OpenAICompatibleChat, {"choices": [{"message": {"content": "Hi."}, "finish_reason": ["stop"]}]}, "cut"),
        ("anthropic", AnthropicChat, {"content": [{"type": "text", "text": "Hi."}], "stop_reason": {"r": 1}}, "cut"),
        ("gemini", GeminiChat, {"candidates": [{"content": {"parts": [{"text": "Hi."}]}, "finishReason": ["STOP"]}]}, "cut"),
        # A content block that is no object: AttributeError
        ("anthropic", AnthropicChat, {"content": ["Hi."]}, "shape"),
        # Streamed: a delta whose text is an object was passed on as its str(); an event that is no object
        ("openai", OpenAICompatibleChat, Sse([(None, json.dumps({"choices": [{"delta": {"content": {"a": 1}}}]}))]), "shape"),
        ("anthropic", AnthropicChat, Sse([("content_block_delta", json.dumps({"delta": {"type": "text_delta", "text": {"a": 1}}}))]), "shape"),
        ("anthropic", AnthropicChat, Sse([("content_block_delta", json.dumps("text"))]), "shape"),
        ("anthropic", AnthropicChat, Sse([("message_delta", json.dumps({"delta": "end_turn"}))]), "shape"),
    ],
)
async def test_a_payload_of_an_odd_shape_is_an_llm_error_or_a_cut(name: str, cls: Any, reply: Any, outcome: str) -> None:
    prefix = "/v1" if name == "openai" else ""
    with json_server(lambda path, body: (200, reply)) as server:
        model = cls(server.url + prefix, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            if outcome == "cut":
                completion = await model.complete("sys", "prompt", temperature=0.1)
                assert completion == "Hi." and completion.truncated  # no known reason: not where the model ended it
            elif isinstance(reply, Sse):
                with pytest.raises(LlmError, match="unexpected streamed event shape"):
                    [t async for t in model.stream("sys", "prompt", temperature=0.1)]
            else:
                with pytest.raises(LlmError, match="unexpected response shape"):
                    await model.complete("sys", "prompt", temperature=0.1)
        finally:
            await model.close()


@pytest.mark.parametrize(("name", "cls", "prefix"), [(p[0], p[1], p[3]) for p in PROTOCOLS], ids=[p[0] for p in PROTOCOLS])
async def test_a_stream_that_ends_before_the_model_says_so_is_reported_cut(name: str, cls: Any, prefix: str) -> None:
    """No finish reason and no end event (a proxy closed the connection): as if max_tokens cut it."""
    stream = _stopped(name, "It is. It is not", "itself", True)
    cut = Sse([e for e in stream.events if "stop" not in e[1].lower() and "[DONE]" not in e[1] and e[0] != "message_stop"])
    assert len(cut.events) == 1  # the text only
    with json_server(lambda path, body: (200, cut)) as server:
        model = cls(server.url + prefix, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            tokens = [t async for t in model.stream("sys", "prompt", temperature=0.1)]
        finally:
            await model.close()
    assert "".join(tokens) == "It is. It is not" and isinstance(tokens[-1], Completion) and tokens[-1].truncated


@pytest.mark.parametrize(
    ("name", "cls", "failure"),
    [
        ("openai", OpenAICompatibleChat, (None, json.dumps({"error": {"message": "The server had an error while processing your request. "
                                                                                 + "Sorry! " * 100, "type": "server_error"}}))),
        ("anthropic", AnthropicChat, ("error", json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded. " * 100}}))),
        ("gemini", GeminiChat, (None, json.dumps({"error": {"code": 500, "message": "The server had an error while processing "
                                                                                  + "your request. " * 100, "status": "INTERNAL"}}))),
    ],
    ids=["openai", "anthropic", "gemini"],
)
async def test_a_stream_that_fails_part_way_says_what_the_provider_said_and_no_more(name: str, cls: Any, failure: tuple[str | None, str]) -> None:
    """OpenAI's and Gemini's error object after some text read as "unexpected streamed event shape";
    Anthropic's error event was repeated whole, however long, where callers read it."""
    text = _stopped(name, "It is", "itself", True).events[0]
    with json_server(lambda path, body: (200, Sse([text, failure]))) as server:
        model = cls(server.url, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            with pytest.raises(LlmError, match="server had an error|overloaded_error") as err:
                _ = [t async for t in model.stream("sys", "prompt", temperature=0.1)]
        finally:
            await model.close()
    assert len(str(err.value)) <= len(f"{name}:m: ") + 200


@pytest.mark.parametrize("sent", ["sized", "unsized", "streamed"])
async def test_a_response_above_the_size_limit_is_a_failed_call(sent: str) -> None:
    """A provider that misbehaves (a runaway generation, a wrong URL serving a file) cannot fill the
    server's memory: the body is read up to MAX_RESPONSE_BYTES, then the call fails (and counts
    against the breaker); the client goes on serving."""
    huge = "x" * (MAX_RESPONSE_BYTES + 1)
    calls: list[str] = []

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        calls.append(path)
        if len(calls) > 1:
            return openai_handler(path, body)
        if sent == "streamed":
            return 200, Sse([(None, json.dumps({"choices": [{"delta": {"content": huge[:1 << 20]}}]}))] * 9)
        reply = {"choices": [{"message": {"role": "assistant", "content": huge}}]}
        return 200, Unsized(reply) if sent == "unsized" else reply

    breaker = CircuitBreaker(failure_threshold=5, cooldown_s=60.0)
    with json_server(handle) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            with pytest.raises(LlmError, match="limit"):
                if sent == "streamed":
                    [t async for t in model.stream("sys", "prompt", temperature=0.1)]
                else:
                    await model.complete("sys", "prompt", temperature=0.1)
            assert breaker.failures == 1
            assert await model.complete("sys", "Rewrite this", temperature=0.1) == _answer("Rewrite this")
        finally:
            await model.close()


@pytest.mark.parametrize("streamed", [False, True], ids=["completed", "streamed"])
async def test_a_response_is_read_only_to_what_max_tokens_can_return(streamed: bool) -> None:
    """Every call was read to 8 MiB, whose JSON of small values took 210 MB once parsed and seconds
    of the event loop. A call's limit is an envelope and 96 bytes a token (16 characters, each
    escaped at worst): a text past it fails the call, a streamed event past it too; the same text
    is read for a max_tokens that can hold it."""
    text = "x" * 100_000

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if body.get("stream"):
            return 200, Sse([(None, json.dumps({"choices": [{"delta": {"content": text}, "finish_reason": "stop"}]})), (None, "[DONE]")])
        return 200, {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}

    async def ask(max_tokens: int) -> str:
        if streamed:
            return "".join([t async for t in model.stream("sys", "prompt", temperature=0.1, max_tokens=max_tokens)])
        return await model.complete("sys", "prompt", temperature=0.1, max_tokens=max_tokens)

    with json_server(handle) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            with pytest.raises(LlmError, match=r"above the limit of 67072 (bytes )?for max_tokens 16$"):
                await ask(16)
            assert await ask(1024) == text
        finally:
            await model.close()


@pytest.mark.parametrize("streamed", [False, True], ids=["completed", "streamed"])
async def test_a_response_sent_past_the_last_ones_end_is_no_later_callers_answer(streamed: bool) -> None:
    """An upstream (or a proxy out of step with it) sent a second whole response right after
    alice's: h11 held it, httpcore put the connection back in the pool (it asks only whether the
    socket is readable), and the next call on it, bob's, was answered with it."""
    leaked = {"choices": [{"message": {"role": "assistant", "content": "Alice's salary is 250,000 EUR [1]."}, "finish_reason": "stop"}]}

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        prompt = body["messages"][1]["content"]
        if body.get("stream"):
            return 200, Sse([(None, json.dumps({"choices": [{"delta": {"content": f"to {prompt}"}, "finish_reason": "stop"}]}))])
        reply = {"choices": [{"message": {"role": "assistant", "content": f"to {prompt}"}, "finish_reason": "stop"}]}
        return 200, Followed(reply, leaked) if prompt == "alice" else reply

    with json_server(handle) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            assert await model.complete("sys", "alice", temperature=0.1) == "to alice"
            if streamed:
                assert "".join([t async for t in model.stream("sys", "bob", temperature=0.1)]) == "to bob"
            else:
                assert await model.complete("sys", "bob", temperature=0.1) == "to bob"
        finally:
            await model.close()
    assert len(server.requests) == 2


async def test_json_nested_past_the_parsers_depth_is_an_llm_error() -> None:
    """A body within the size limit nested 50,000 deep raised RecursionError, which no model
    consumer's fallback catches; in a 400 it also counted against the breaker, as no refusal."""
    nested = b"[" * 50_000
    replies = iter([
        (200, Streamed({"Content-Type": "application/json"}, [nested])),
        (400, Streamed({"Content-Type": "application/json"}, [b'{"error": ' + nested])),
        (200, Sse([(None, nested.decode())])),
    ])
    breaker = CircuitBreaker(failure_threshold=5, cooldown_s=60.0)
    with json_server(lambda path, body: next(replies)) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            with pytest.raises(LlmError, match="invalid JSON"):
                await model.complete("sys", "prompt", temperature=0.1)
            assert breaker.failures == 1
            with pytest.raises(LlmRefused, match="400"):
                await model.complete("sys", "prompt", temperature=0.1)
            assert breaker.failures == 1  # the request's refusal, not the provider's failure
            with pytest.raises(LlmError, match="invalid JSON"):
                [t async for t in model.stream("sys", "prompt", temperature=0.1)]
        finally:
            await model.close()


_WHOLE = {
    "openai": {"choices": [{"message": {"role": "assistant", "content": "It is. It is not"}, "finish_reason": "length"}]},
    "anthropic": {"content": [{"type": "text", "text": "It is. It is not"}], "stop_reason": "max_tokens"},
    "gemini": {"candidates": [{"content": {"parts": [{"text": "It is. It is not"}]}, "finishReason": "MAX_TOKENS"}]},
}


@pytest.mark.parametrize(("name", "cls", "prefix"), [(p[0], p[1], p[3]) for p in PROTOCOLS], ids=[p[0] for p in PROTOCOLS])
async def test_a_stream_answered_with_one_json_completion_is_its_text_in_one_piece(name: str, cls: Any, prefix: str) -> None:
    """A server that ignores "stream": true and answers application/json: the call was sent again
    max_retries times (the provider billing the whole answer each time), then failed."""
    breaker = CircuitBreaker(failure_threshold=5, cooldown_s=60.0)
    with json_server(lambda path, body: (200, _WHOLE[name])) as server:
        model = cls(server.url + prefix, "m", timeout_s=LOCAL_S, max_retries=2, backoff_s=0, breaker=breaker)
        try:
            tokens = [t async for t in model.stream("sys", "prompt", temperature=0.1)]
        finally:
            await model.close()
    assert tokens == ["It is. It is not"] and isinstance(tokens[0], Completion) and tokens[0].truncated  # stopped at max_tokens
    assert len(server.requests) == 1 and breaker.failures == 0


async def test_a_redirected_stream_is_told_by_its_status() -> None:
    """A 308 (a base URL moved to https) read as a malformed completion: its JSON body as the answer."""
    moved = WithHeaders({"detail": "moved"}, {"Location": "https://elsewhere/v1/chat/completions"})
    with json_server(lambda path, body: (308, moved)) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=LOCAL_S, max_retries=2, backoff_s=0)
        try:
            with pytest.raises(LlmError, match="HTTP 308 Permanent Redirect"):
                await model.complete("sys", "prompt", temperature=0.1)
            with pytest.raises(LlmError, match="HTTP 308 Permanent Redirect"):
                _ = [t async for t in model.stream("sys", "prompt", temperature=0.1)]
        finally:
            await model.close()
    assert len(server.requests) == 2


async def test_a_stream_answered_in_another_content_type_fails_at_once() -> None:
    page = Streamed({"Content-Type": "text/html; charset=utf-8"}, [b"<html>proxy login</html>"])
    with json_server(lambda path, body: (200, page)) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=LOCAL_S, max_retries=2, backoff_s=0)
        try:
            with pytest.raises(LlmError, match="came as 'text/html', not text/event-stream"):
                [t async for t in model.stream("sys", "prompt", temperature=0.1)]
        finally:
            await model.close()
    assert len(server.requests) == 1


async def test_a_streamed_answer_is_counted_as_it_arrives_not_event_by_event() -> None:
    """One event that never ends (a line of 96 MiB without a newline): the parser would hold it
    whole before any count; the client stops reading past the limit, and the call fails."""
    total = 96 * 1024 * 1024
    piece = b"x" * (64 * 1024)
    endless = Streamed({"Content-Type": "text/event-stream"}, [b"data: ", *([piece] * (total // len(piece)))])
    with json_server(lambda path, body: (200, endless)) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            with pytest.raises(LlmError, match="limit"):
                [t async for t in model.stream("sys", "prompt", temperature=0.1)]
        finally:
            await model.close()
        while not server.sent:  # the server notices the client went
            await asyncio.sleep(0.01)
    assert server.sent[0] < 3 * MAX_RESPONSE_BYTES, f"{server.sent[0]} bytes were read of a stream past the limit"


async def test_a_compressed_response_is_inflated_no_further_than_the_limit() -> None:
    """64 KiB of gzip that inflate to 64 MiB: read raw and inflated within the limit, where httpx
    inflated each read whole (64 MiB at once) before anything could count it."""
    import gzip

    import httpx

    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024))
    assert len(bomb) < 128 * 1024
    reply = Streamed({"Content-Type": "application/json", "Content-Encoding": "gzip"}, [bomb])
    with json_server(lambda path, body: (200, reply)) as server:
        async with httpx.AsyncClient() as client, client.stream("POST", server.url + "/v1/chat/completions", json={}) as response:
            seen = 0
            with pytest.raises(ResponseRefused, match="limit"):
                async for chunk in body_chunks(response):
                    seen += len(chunk)
                    assert seen <= MAX_RESPONSE_BYTES
    small = Streamed({"Content-Type": "application/json", "Content-Encoding": "gzip"}, [gzip.compress(b'{"ok": true}')])
    with json_server(lambda path, body: (200, small)) as server:
        async with httpx.AsyncClient() as client, client.stream("POST", server.url + "/", json={}) as response:
            assert b"".join([c async for c in body_chunks(response)]) == b'{"ok": true}'


@pytest.mark.parametrize("first", [1, 2, 5])
@pytest.mark.parametrize("wbits", [zlib.MAX_WBITS, -zlib.MAX_WBITS], ids=["zlib", "raw"])
async def test_a_deflate_body_is_inflated_however_its_first_read_is_cut(wbits: int, first: int) -> None:
    """Raw deflate (as some servers send "deflate") whose first read was one byte was refused as
    broken: zlib cannot tell its own format from raw before its 2-byte header is whole."""
    import httpx

    class Pieces(httpx.AsyncByteStream):
        def __init__(self, *pieces: bytes) -> None:
            self._pieces = pieces

        async def __aiter__(self) -> AsyncIterator[bytes]:
            for piece in self._pieces:
                yield piece

    text = b'{"ok": true, "pad": "' + b"a" * 100 + b'"}'
    squeezer = zlib.compressobj(wbits=wbits)
    body = squeezer.compress(text) + squeezer.flush()
    response = httpx.Response(200, headers={"Content-Encoding": "deflate"}, stream=Pieces(body[:first], body[first:]))
    assert b"".join([c async for c in body_chunks(response)]) == text


async def test_failing_llm_falls_back_to_classical_methods() -> None:
    with json_server(lambda path, body: (500, {"error": "down"})) as server:
        model = GeminiChat(server.url, "gemini-test", timeout_s=LOCAL_S, max_retries=1, backoff_s=0.01)
        analyzer = LlmAnalyzer({t: TechniqueModel(model, temp) for t, temp in TEMPS.items()}, ClassicalAnalyzer({"rrf": "reciprocal rank fusion"}))
        try:
            a = await analyze(analyzer, QUERY, [], timeout_s=LOCAL_S, total_timeout_s=2 * LOCAL_S)
        finally:
            await model.close()
    assert a.rewritten == "How does RRF (reciprocal rank fusion) work and why is reranking slow?"
    assert a.sub_queries == ["How does RRF work", "why is reranking slow?"]
    assert a.dropped["rewrite"].startswith("llm_failed_used_classical")
    assert a.dropped["decompose"].startswith("llm_failed_used_classical")
    assert a.hyde is None and a.dropped["hyde"] == "failed: LlmError"  # no classical HyDE to fall back on


@pytest.mark.parametrize(("status", "kind"), [(400, "LlmRefused"), (503, "LlmError")], ids=["refused", "failing"])
async def test_a_model_failing_every_call_is_logged_once_per_kind_whatever_its_breaker_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, status: int, kind: str
) -> None:
    """A 400 on every call (max_tokens over the model's limit, a model the gateway does not know)
    is a refusal of each request, which leaves the breaker closed: every technique failed,
    Health said OK, and nothing was logged above DEBUG. A failure the breaker counts is logged
    too: other callers' successes can keep the breaker from ever opening."""
    with json_server(lambda path, body: (status, {"error": {"message": "max_tokens: 300 > 256", "type": "invalid_request_error"}})) as llm:
        app = Application(load_settings(data_dir=tmp_path, cache_backend="none", llm_provider="openai", openai_base_url=llm.url + "/v1",
                                        openai_model="m", openai_api_key="k", llm_max_retries=0, llm_timeout_s=LOCAL_S,
                                        analysis_timeout_s=LOCAL_S, analysis_total_timeout_s=2 * LOCAL_S))
        await app.open()
        app.pipeline.deps.log_limit.clock = Clock()  # time stands still: one line per kind, however long the test takes
        try:
            with caplog.at_level(logging.DEBUG, logger="retrieval_server.workflow.analysis"):
                for _ in range(3):
                    result = await app.pipeline.query(QueryOptions(QUERY, 3, use_cache=False))
                    assert any(d.startswith("analysis:hyde:failed") for d in result.metrics.degraded), result.metrics.degraded
        finally:
            await app.close()
    failed = [r for r in caplog.records if r.name == "retrieval_server.workflow.analysis" and "failed" in r.getMessage()]
    loud = [r.getMessage() for r in failed if r.levelno >= logging.WARNING]
    assert len(loud) == 1 and all(kind in m and f"HTTP {status}" in m for m in loud), loud
    assert len(failed) > len(loud), "each request's failures are at DEBUG"


async def test_an_open_breakers_refusals_are_debug_and_leave_the_line_to_the_models_failure(caplog: pytest.LogCaptureFixture) -> None:
    """With no classical method to stand in (reformulate on a first pass, HyDE, decompose of one
    question), analysis re-raised the model's error without its cause, and an open breaker's
    refusal, no longer told apart, was logged WARNING and took the minute's line: the provider's
    own failure at the trial call after the cool-down was then DEBUG."""
    clock = Clock()
    breaker = CircuitBreaker(failure_threshold=1, cooldown_s=60.0, clock=clock)
    limit = LogLimit(clock=Clock())  # time stands still for the log: one line per key
    with refused_port() as port:
        model = OpenAICompatibleChat(f"http://127.0.0.1:{port}/v1", "m", "k", timeout_s=LOCAL_S, max_retries=0, backoff_s=0, breaker=breaker)
        analyzer = LlmAnalyzer({t: TechniqueModel(model, temp) for t, temp in TEMPS.items()}, ClassicalAnalyzer())
        breaker.record_failure(LlmError("HTTP 503"))
        assert breaker.is_open
        try:
            with caplog.at_level(logging.DEBUG, logger="retrieval_server.workflow.analysis"):
                refused = await analyze(analyzer, "what raises the tides", [], timeout_s=LOCAL_S, total_timeout_s=2 * LOCAL_S, log_limit=limit)
                clock.now += 61.0  # the cool-down over: one trial call reaches the provider, which is down
                await analyze(analyzer, "what raises the tides", [], timeout_s=LOCAL_S, total_timeout_s=2 * LOCAL_S, log_limit=limit)
        finally:
            await model.close()
    assert refused.dropped["hyde"] == "failed: LlmError"
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "retrieval_server.workflow.analysis" and "failed" in r.getMessage()]
    assert not [m for level, m in lines if level >= logging.WARNING and "circuit open" in m], lines
    assert [m for level, m in lines if level >= logging.WARNING and "circuit open" not in m], lines


async def test_slow_technique_is_dropped_not_waited_for() -> None:
    release, answered = threading.Event(), threading.Event()

    def slow(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        release.wait()  # until the test has its result: only a dropped technique lets it finish first
        answered.set()
        return openai_handler(path, body)

    with json_server(slow) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=30, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({"hyde": TechniqueModel(model, 0.5)}, ClassicalAnalyzer())
        try:
            # The model never answers in time: the per-technique limit is the subject, however short;
            # the total limit is far beyond it, so a stalled loop still ends hyde by its own limit.
            a = await analyze(analyzer, "what is small-to-big retrieval", [], timeout_s=0.3, total_timeout_s=2 * LOCAL_S)
            assert not answered.is_set()
        finally:
            release.set()
            await model.close()
    assert a.dropped["hyde"] == "timeout" and a.hyde is None


async def test_a_request_cancelled_mid_analysis_is_no_failure_of_the_model_a_technique_timing_out_is() -> None:
    """A caller that goes away (or whose deadline passes) cancels its four analysis calls at once:
    that must not open the model's breaker for every other caller. A technique cancelled for
    taking too long is the model's failure, and counts once per analysis, however many of the
    request's concurrent calls timed out."""
    release, in_flight = threading.Event(), threading.Semaphore(0)

    def held(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        in_flight.release()
        release.wait()
        return openai_handler(path, body)

    with json_server(held) as server:
        breaker = CircuitBreaker(failure_threshold=2, cooldown_s=3600.0, clock=Clock())
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0, breaker=breaker)
        analyzer = LlmAnalyzer({t: TechniqueModel(model, temp) for t, temp in TEMPS.items()}, ClassicalAnalyzer())
        try:
            # A request's four analysis calls, cancelled together.
            calls = [asyncio.ensure_future(model.complete("sys", f"Rewrite {t}", temperature=0.1)) for t in TEMPS]
            for _ in calls:  # every call has reached the model
                assert await asyncio.to_thread(in_flight.acquire, timeout=LOCAL_S), "a call never reached the model"
            for call in calls:
                call.cancel()
            for call in calls:
                with pytest.raises(asyncio.CancelledError):
                    await call
            assert not breaker.is_open, "one cancelled request opened the breaker for every caller"
            # The model never answers in time: the per-technique limit is the subject, however short.
            a = await analyze(analyzer, QUERY, [], timeout_s=0.3, total_timeout_s=2 * LOCAL_S)
            assert list(a.dropped.values()) == ["timeout"] * 4
            assert not breaker.is_open, "one request's four timeouts counted as four failures"
            await analyze(analyzer, QUERY, [], timeout_s=0.3, total_timeout_s=2 * LOCAL_S)
        finally:
            release.set()
            await model.close()
    assert breaker.is_open


class _OnRetry(logging.Handler):
    """Sets ``event`` when the client says it waits before a retry: the call is in its backoff."""

    def __init__(self, event: asyncio.Event) -> None:
        super().__init__(logging.DEBUG)
        self.event = event

    def emit(self, record: logging.LogRecord) -> None:
        if "retrying in" in record.getMessage():
            self.event.set()


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_a_failed_attempt_counts_against_the_breaker_when_its_backoff_is_cancelled(stream: bool, caplog: pytest.LogCaptureFixture) -> None:
    """A model refusing connections to callers that give up during the backoff (their deadline
    shorter than it) never opened its breaker: the failure was thrown away with the cancellation,
    and every query paid the backoff while Health said SERVING."""
    caplog.set_level(logging.DEBUG, logger="retrieval_server.backends.llm")
    backing_off = asyncio.Event()
    on_retry = _OnRetry(backing_off)
    logging.getLogger("retrieval_server.backends.llm").addHandler(on_retry)
    with refused_port() as port:
        breaker = CircuitBreaker(failure_threshold=3, cooldown_s=3600.0, clock=Clock())
        model = OpenAICompatibleChat(f"http://127.0.0.1:{port}/v1", "m", timeout_s=LOCAL_S, max_retries=2, backoff_s=3600, breaker=breaker)

        async def ask() -> None:
            if stream:
                _ = [t async for t in model.stream("sys", "Rewrite this", temperature=0.1)]
            else:
                await model.complete("sys", "Rewrite this", temperature=0.1)

        try:
            for _ in range(3):
                backing_off.clear()
                call = asyncio.ensure_future(ask())
                await backing_off.wait()
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call
            assert breaker.is_open, f"{breaker.failures} failures counted of 3 attempts that failed"
            with pytest.raises(LlmError, match="circuit open"):
                await ask()
        finally:
            logging.getLogger("retrieval_server.backends.llm").removeHandler(on_retry)
            await model.close()


async def test_a_backoff_past_the_analysis_deadline_is_not_started_and_the_failure_counts() -> None:
    """Analysis gets half the request's time left; a backoff longer than that was cut by it, the
    technique reported as cut by the deadline. It fails at once instead, counted, and the
    classical method answers."""
    with refused_port() as port:
        breaker = CircuitBreaker(failure_threshold=3, cooldown_s=3600.0, clock=Clock())
        model = OpenAICompatibleChat(f"http://127.0.0.1:{port}/v1", "m", timeout_s=LOCAL_S, max_retries=2, backoff_s=3600, breaker=breaker)
        analyzer = LlmAnalyzer({t: TechniqueModel(model, temp) for t, temp in TEMPS.items()}, ClassicalAnalyzer({"rrf": "reciprocal rank fusion"}))
        try:
            a = await analyze(analyzer, QUERY, [], timeout_s=LOCAL_S, total_timeout_s=2 * LOCAL_S, time_left_s=LOCAL_S)
        finally:
            await model.close()
    assert a.dropped["rewrite"].startswith("llm_failed_used_classical"), a.dropped
    assert a.rewritten == "How does RRF (reciprocal rank fusion) work and why is reranking slow?"
    assert breaker.is_open


async def test_the_service_keeps_answering_when_the_llm_is_down(tmp_path: Path) -> None:
    with json_server(lambda path, body: (503, {"error": "down"})) as server:
        app = Application(load_settings(data_dir=tmp_path, llm_provider="openai", openai_base_url=server.url, llm_max_retries=0,
                                        llm_timeout_s=LOCAL_S, analysis_timeout_s=LOCAL_S, analysis_total_timeout_s=2 * LOCAL_S))
        await app.open()
        try:
            await app.ingest([DocumentSource(filename="f.txt", content=b"Reciprocal rank fusion combines ranked lists from several retrievers.")])
            r = await app.pipeline.query(QueryOptions("how are ranked lists combined", 1))
        finally:
            await app.close()
    assert r.contexts and r.contexts[0].document.document_id == "f"
    assert any(d.startswith("analysis:hyde:failed") for d in r.metrics.degraded)
    assert len(server.requests) >= 3  # the model was asked, then worked around


async def test_a_message_without_text_is_a_failed_call_not_the_text_none() -> None:
    # OpenAI-compatible servers answer "content": null when the model wrote no text (a refusal, a
    # tool call, a reasoning model that spent max_tokens thinking): that is no passage to search for.
    with json_server(lambda path, body: (200, {"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "length"}]})) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({"hyde": TechniqueModel(model, 0.5)}, ClassicalAnalyzer())
        try:
            with pytest.raises(LlmError, match="no text"):
                await model.complete("sys", "Write a short passage", temperature=0.5)
            a = await analyze(analyzer, "what is small-to-big retrieval", [], timeout_s=LOCAL_S, total_timeout_s=2 * LOCAL_S)
        finally:
            await model.close()
    assert a.hyde is None and a.dropped["hyde"] == "failed: LlmError"


@pytest.mark.parametrize(
    ("cls", "reply", "reason"),
    [
        # A reasoning model that spent max_completion_tokens thinking: "", not null
        (OpenAICompatibleChat, {"choices": [{"message": {"role": "assistant", "content": ""}, "finish_reason": "length"}]}, "finish_reason length"),
        (OpenAICompatibleChat, {"choices": [{"message": {"role": "assistant", "content": " \n"}, "finish_reason": "stop"}]}, "finish_reason stop"),
        (AnthropicChat, {"content": [], "stop_reason": "max_tokens"}, "stop_reason max_tokens"),
        (AnthropicChat, {"content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": ""}], "stop_reason": "end_turn"},
         "stop_reason end_turn"),
        (GeminiChat, {"candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": "MAX_TOKENS"}]}, "finishReason MAX_TOKENS"),
    ],
    ids=["openai-empty", "openai-blank", "anthropic-no-blocks", "anthropic-empty-text", "gemini-empty-text"],
)
async def test_an_answer_of_no_words_is_a_failed_call_that_counts_against_the_breaker(cls: Any, reply: Any, reason: str) -> None:
    """Taken as an answer, "" was a success: the breaker stayed closed and a summary said nothing."""
    breaker = CircuitBreaker(failure_threshold=5, cooldown_s=60.0, clock=Clock())
    with json_server(lambda path, body: (200, reply)) as server:
        model = cls(server.url, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            with pytest.raises(LlmError, match=f"no text \\({reason}\\)") as err:
                await model.complete("sys", "prompt", temperature=0.1)
        finally:
            await model.close()
    assert not isinstance(err.value, LlmRefused) and breaker.failures == 1


@pytest.mark.parametrize("sent", ["no-event", "empty-text"])
@pytest.mark.parametrize(("name", "cls", "prefix"), [(p[0], p[1], p[3]) for p in PROTOCOLS], ids=[p[0] for p in PROTOCOLS])
async def test_a_stream_of_no_words_is_a_failed_call_that_counts_against_the_breaker(name: str, cls: Any, prefix: str, sent: str) -> None:
    """A 200 event stream that ends with no text (a proxy's empty answer, a model that spent
    max_tokens thinking) was a success: the breaker stayed closed and the answer said nothing."""
    reply = Sse([]) if sent == "no-event" else _stopped(name, "", "itself", True)
    breaker = CircuitBreaker(failure_threshold=5, cooldown_s=60.0, clock=Clock())
    with json_server(lambda path, body: (200, reply)) as server:
        model = cls(server.url + prefix, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            with pytest.raises(LlmError, match="the stream ended with no text") as err:
                _ = [t async for t in model.stream("sys", "prompt", temperature=0.1)]
        finally:
            await model.close()
    assert not isinstance(err.value, LlmRefused) and breaker.failures == 1


@pytest.mark.parametrize(("name", "cls", "prefix"), [(p[0], p[1], p[3]) for p in PROTOCOLS], ids=[p[0] for p in PROTOCOLS])
async def test_streamed_answers_go_through_the_circuit_breaker(name: str, cls: Any, prefix: str) -> None:
    """A streamed answer (StreamQuery, `ask`) is refused at once while the model's breaker is open,
    and a stream that fails counts towards opening it, as a completion does."""
    with json_server(lambda path, body: (503, {"error": "down"})) as server:
        model = cls(server.url + prefix, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0,
                    breaker=CircuitBreaker(failure_threshold=1, cooldown_s=60.0, clock=Clock()))
        try:
            with pytest.raises(LlmError, match="503"):
                _ = [t async for t in model.stream("sys", "prompt", temperature=0.1)]
            with pytest.raises(LlmError, match="circuit open"):
                await model.complete("sys", "prompt", temperature=0.1)
            with pytest.raises(LlmError, match="circuit open"):
                _ = [t async for t in model.stream("sys", "prompt", temperature=0.1)]
        finally:
            await model.close()
    assert len(server.requests) == 1  # only the first stream reached the server


@pytest.mark.parametrize(("name", "cls", "prefix"), [(p[0], p[1], p[3]) for p in PROTOCOLS], ids=[p[0] for p in PROTOCOLS])
async def test_answers_that_hold_no_completion_open_the_breaker(name: str, cls: Any, prefix: str) -> None:
    """200 with JSON of another shape (a gateway's error object) fails every call: each counts
    towards opening the breaker, as a 503 does, not as a success."""
    with json_server(lambda path, body: (200, {"error": {"message": "upstream overloaded"}})) as server:
        breaker = CircuitBreaker(failure_threshold=2, cooldown_s=60.0, clock=Clock())
        model = cls(server.url + prefix, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            for _ in range(2):
                with pytest.raises(LlmError, match="unexpected response shape"):
                    await model.complete("sys", "prompt", temperature=0.1)
            assert breaker.is_open
            with pytest.raises(LlmError, match="circuit open"):
                await model.complete("sys", "prompt", temperature=0.1)
        finally:
            await model.close()
    assert len(server.requests) == 2


#: a content filter's answers, HTTP 200 without a completion: a refusal of this request's content
FILTERED = [
    ("openai-refusal", OpenAICompatibleChat, "/v1",
     {"choices": [{"message": {"role": "assistant", "content": None, "refusal": "I can't help with that."}, "finish_reason": "stop"}]}),
    ("openai-content-filter", OpenAICompatibleChat, "/v1", {"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "content_filter"}]}),
    ("openai-content-filter-empty", OpenAICompatibleChat, "/v1", {"choices": [{"message": {"role": "assistant", "content": ""}, "finish_reason": "content_filter"}]}),
    ("anthropic-refusal", AnthropicChat, "", {"content": [], "stop_reason": "refusal"}),
    ("gemini-prompt-blocked", GeminiChat, "", {"promptFeedback": {"blockReason": "SAFETY"}}),
    ("gemini-candidate-stopped", GeminiChat, "", {"candidates": [{"finishReason": "SAFETY"}]}),
]


@pytest.mark.parametrize(("name", "cls", "prefix", "filtered"), FILTERED, ids=[f[0] for f in FILTERED])
async def test_a_content_filters_refusal_leaves_the_breaker_closed(name: str, cls: Any, prefix: str, filtered: dict[str, Any]) -> None:
    """Counted as a failure, one caller's blocked query, sent by the four techniques at once,
    opened the breaker for every other caller (their harmless queries got "circuit open")."""
    def handler(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if "blocked" in json.dumps(body):
            return 200, filtered
        return 200, {"error": "not a completion"}  # the provider's own failure, which counts

    with json_server(handler) as server:
        breaker = CircuitBreaker(failure_threshold=1, cooldown_s=60.0, clock=Clock())
        model = cls(server.url + prefix, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            for _ in range(4):
                with pytest.raises(LlmRefused, match="refused this request's content"):
                    await model.complete("sys", "blocked", temperature=0.1)
            assert not breaker.is_open
            with pytest.raises(LlmError, match="unexpected response shape"):
                await model.complete("sys", "prompt", temperature=0.1)
            assert breaker.is_open
        finally:
            await model.close()


#: a content filter's streamed answers: a refusal before any text, as FILTERED's
STREAMED_FILTERED = [
    ("gemini-prompt-blocked", GeminiChat, "", Sse([(None, json.dumps({"promptFeedback": {"blockReason": "SAFETY"}}))])),
    ("gemini-candidate-stopped", GeminiChat, "", Sse([(None, json.dumps({"candidates": [{"finishReason": "SAFETY"}]}))])),
    ("openai-content-filter", OpenAICompatibleChat, "/v1",
     Sse([(None, json.dumps({"choices": [{"delta": {}, "finish_reason": "content_filter"}]})), (None, "[DONE]")])),
    # OpenAI's refusal: delta.refusal pieces, content null, finish_reason "stop"
    ("openai-refusal", OpenAICompatibleChat, "/v1", Sse([
        (None, json.dumps({"choices": [{"delta": {"role": "assistant", "content": None, "refusal": ""}, "finish_reason": None}]})),
        (None, json.dumps({"choices": [{"delta": {"refusal": "I'm sorry, I can't help with that."}, "finish_reason": None}]})),
        (None, json.dumps({"choices": [{"delta": {}, "finish_reason": "stop"}]})), (None, "[DONE]")])),
    ("anthropic-refusal", AnthropicChat, "", Sse([("message_delta", json.dumps({"type": "message_delta", "delta": {"stop_reason": "refusal"}})),
                                                  ("message_stop", json.dumps({"type": "message_stop"}))])),
    # after a piece of whitespace only, which complete() reads as no text either
    ("gemini-after-blank", GeminiChat, "", _stopped("gemini", "\n", "filter", True)),
    ("openai-after-blank", OpenAICompatibleChat, "/v1", _stopped("openai", "\n", "filter", True)),
    ("anthropic-after-blank", AnthropicChat, "", _stopped("anthropic", " \n", "filter", True)),
]


@pytest.mark.parametrize(("name", "cls", "prefix", "filtered"), STREAMED_FILTERED, ids=[f[0] for f in STREAMED_FILTERED])
async def test_a_content_filters_streamed_refusal_leaves_the_breaker_closed(name: str, cls: Any, prefix: str, filtered: Sse) -> None:
    """As test_a_content_filters_refusal_leaves_the_breaker_closed, streamed (StreamQuery, `ask`)."""
    def handler(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return (200, filtered) if "blocked" in json.dumps(body) else (503, {"error": "down"})

    with json_server(handler) as server:
        breaker = CircuitBreaker(failure_threshold=1, cooldown_s=60.0, clock=Clock())
        model = cls(server.url + prefix, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            for _ in range(4):
                with pytest.raises(LlmRefused, match="refused this request's content"):
                    _ = [t async for t in model.stream("sys", "blocked", temperature=0.1)]
            assert not breaker.is_open
            with pytest.raises(LlmError, match="503"):
                _ = [t async for t in model.stream("sys", "prompt", temperature=0.1)]
            assert breaker.is_open
        finally:
            await model.close()


@pytest.mark.parametrize(("name", "cls", "prefix"), [(p[0], p[1], p[3]) for p in PROTOCOLS], ids=[p[0] for p in PROTOCOLS])
async def test_a_request_the_provider_refuses_for_its_content_leaves_the_breaker_closed(name: str, cls: Any, prefix: str) -> None:
    """One caller's query over the model's context window (400), sent by four techniques at once,
    must not open the breaker every other caller's analysis, routing and answers go through."""
    def handler(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if "too long" in json.dumps(body):
            return 400, {"error": {"code": "context_length_exceeded", "message": "maximum context length"}}
        return 503, {"error": "down"}

    with json_server(handler) as server:
        model = cls(server.url + prefix, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0,
                    breaker=CircuitBreaker(failure_threshold=1, cooldown_s=60.0, clock=Clock()))
        try:
            for _ in range(3):
                with pytest.raises(LlmRefused, match="400"):
                    await model.complete("sys", "too long", temperature=0.1)
                with pytest.raises(LlmRefused, match="400"):
                    _ = [t async for t in model.stream("sys", "too long", temperature=0.1)]
            with pytest.raises(LlmError, match="503"):  # the provider's own failure still counts
                await model.complete("sys", "prompt", temperature=0.1)
            with pytest.raises(LlmError, match="circuit open"):
                await model.complete("sys", "too long", temperature=0.1)
        finally:
            await model.close()
    assert len(server.requests) == 7


async def test_a_stream_read_to_its_end_closes_the_breaker() -> None:
    clock = Clock()
    events = [(None, '{"choices": [{"delta": {"content": "ok"}}]}'), (None, "[DONE]")]
    with json_server(lambda path, body: (200, Sse(events))) as server:
        breaker = CircuitBreaker(failure_threshold=1, cooldown_s=1.0, clock=clock)
        model = OpenAICompatibleChat(server.url, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0, breaker=breaker)
        try:
            breaker.record_failure()
            clock.now = 1.0  # the half-open trial is the stream
            assert [t async for t in model.stream("sys", "prompt", temperature=0.1)] == ["ok"]
        finally:
            await model.close()
    assert not breaker.is_open


async def test_a_failed_call_never_repeats_the_urls_password(caplog: pytest.LogCaptureFixture) -> None:
    """httpx's text for a status names the whole URL: a caller read it in a tool's failure and in
    the extractive answer that said so, and a log in every traceback of the error."""
    from retrieval_server.backends.reranker import RerankError, TeiReranker

    with json_server(lambda path, body: (503, {"error": {"message": "overloaded"}})) as server:
        base = server.url.replace("http://", "http://svc:S3cretPassw0rd@")
        model = OpenAICompatibleChat(base + "/v1", "m", "sk", timeout_s=LOCAL_S, max_retries=1, backoff_s=0)
        tei = TeiReranker(base, timeout_s=LOCAL_S)
        failures: list[BaseException] = []
        try:
            # The retry's line is DEBUG (its breaker logs when it opens); httpx's own lines, which
            # name the URL, are muted by the service's logging set-up, not read here.
            with caplog.at_level("DEBUG", logger="retrieval_server"):
                for call in (lambda: model.complete("sys", "prompt", temperature=0.1), lambda: _drained(model), lambda: tei.rerank("q", ["a"])):
                    with pytest.raises((LlmError, RerankError)) as err:
                        await call()
                    failures.append(err.value)
        finally:
            await model.close()
            await tei.close()
    for failure in failures:
        assert "503" in str(failure) and "S3cret" not in str(failure), failure
        assert failure.__cause__ is None and failure.__suppress_context__  # no traceback quotes httpx's text
    assert "retrying" in caplog.text and "S3cret" not in caplog.text


#: an API key of no known shape: only its value tells it
_KEY = "gw-7f3a9c1e5b2d4086"


def _echoing(protocol: str, headers: dict[str, str]) -> Any:
    """A provider's error, after a 200, that echoes the request's credentials (and a proxy's own)."""
    said = (f"invalid request: authorization={headers.get('authorization')} x-api-key={headers.get('x-api-key')} "
            f"x-goog-api-key={headers.get('x-goog-api-key')} upstream Bearer abc.def.ghi key sk-ant-api03-Zx9Yw8Vu7Ts6 AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q")
    if protocol == "anthropic":
        return Sse([("error", json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": said}}))])
    return Sse([(None, json.dumps({"error": {"code": 400, "message": said, "status": "INVALID_ARGUMENT"}}))])


@pytest.mark.parametrize(("name", "cls", "prefix"), [(p[0], p[1], p[3]) for p in PROTOCOLS], ids=[p[0] for p in PROTOCOLS])
async def test_a_providers_error_text_never_repeats_an_api_key(name: str, cls: Any, prefix: str) -> None:
    """A server echoing the request's headers in its error put "Bearer sk-..." where callers read
    the failure and in the log (answer generation logs it): the configured key's value, bearer
    tokens and keys of OpenAI's, Anthropic's and Google's shapes are redacted from it."""
    server_headers: list[dict[str, str]] = []
    with json_server(lambda path, body: (200, _echoing(name, server_headers[-1]))) as server:
        server_headers = server.headers
        model = cls(server.url + prefix, "m", _KEY, timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            with pytest.raises(LlmError, match="invalid request") as err:
                await _drained(model)
        finally:
            await model.close()
    assert _KEY in json.dumps(server.headers[-1])  # the key was sent, and echoed
    for secret in (_KEY, "abc.def", "Zx9Yw8", "A1b2C3d4"):
        assert secret not in str(err.value), str(err.value)
    assert "[redacted]" in str(err.value), str(err.value)


@pytest.mark.parametrize("key", ["e", _KEY])
async def test_the_api_keys_value_is_redacted_where_it_stands_alone_not_inside_words(key: str) -> None:
    """A short or common key (a gateway's placeholder: "e", "x", "EMPTY") was replaced inside every
    word of the provider's errors and log lines: "HTTP 503 S[redacted]rvic[redacted] Unavailabl[redacted]"."""
    echoed = json.dumps({"request": {"api_key": key, "model": "embedder"}})
    replies = iter([(503, {"error": {"message": "overloaded"}}), (200, Sse([(None, json.dumps({"error": {"message": f"rejected {echoed}"}}))]))])
    with json_server(lambda path, body: next(replies)) as server:
        model = OpenAICompatibleChat(server.url, "m", key, timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        try:
            with pytest.raises(LlmError) as failed:
                await model.complete("sys", "prompt", temperature=0.1)
            with pytest.raises(LlmError) as said:
                await _drained(model)
        finally:
            await model.close()
    assert str(failed.value) == "openai:m: HTTP 503 Service Unavailable"
    assert str(said.value) == 'openai:m: rejected {"request": {"api_key": "[redacted]", "model": "embedder"}}'


async def _drained(model: OpenAICompatibleChat, prompt: str = "prompt") -> None:
    async for _ in model.stream("sys", prompt, temperature=0.1):
        pass


async def test_a_response_dripped_a_byte_at_a_time_ends_within_the_timeout() -> None:
    """httpx's timeout bounds each read: a body sent a byte more often than that was read until the
    8 MiB limit. The whole call is now held to the timeout (1 s here; the drip never ends)."""
    import time

    from retrieval_server.backends.reranker import RerankError, TeiReranker

    def drip() -> Iterator[bytes]:
        while True:  # until the client goes
            yield b" "
            time.sleep(0.05)

    def handle(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return 503 if "failing" in json.dumps(body) else 200, Streamed({"Content-Type": "application/json"}, drip())

    with json_server(handle) as server:
        model = OpenAICompatibleChat(server.url, "m", timeout_s=1.0, max_retries=0, backoff_s=0)
        tei = TeiReranker(server.url, timeout_s=1.0)
        try:
            # The bound only turns the old code's wait into a failure.
            with pytest.raises(LlmError, match="no whole response within 1 s"):
                await asyncio.wait_for(model.complete("sys", "prompt", temperature=0.1), 120)
            # A streamed call's error body, and a whole completion instead of a stream, read whole too.
            for prompt in ("failing", "prompt"):
                with pytest.raises(LlmError, match="no whole response within 1 s"):
                    await asyncio.wait_for(_drained(model, prompt), 120)
            with pytest.raises(RerankError, match="no whole response within 1 s"):
                await asyncio.wait_for(tei.rerank("q", ["a"]), 120)
        finally:
            await model.close()
            await tei.close()


async def test_the_models_preambles_repeats_and_cut_lines_are_not_searched() -> None:
    """Each line a model writes becomes a search: a preamble ("...:"), a heading, the query itself
    and repeats were searched as queries, and a rewrite max_tokens cut replaced the query."""
    answers = {
        "Rewrite": ("Sure! Here is the rewritten query:\n" + QUERY, "stop"),
        "Write 3": (f"Variants:\n1. {QUERY}\n2. RRF explained\n3. rrf  EXPLAINED\n4. why rerankers are", "length"),
        "If this": ("Sub-questions:\n- How does RRF work?\n- How does RRF work?\n- Why is reranking slow?", "stop"),
    }

    def handler(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        prompt = body["messages"][1]["content"]
        text, reason = next((a for start, a in answers.items() if prompt.startswith(start)), ("", "stop"))
        return 200, {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": reason}]}

    with json_server(handler) as server:
        model = OpenAICompatibleChat(server.url + "/v1", "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({t: TechniqueModel(model, temp) for t, temp in TEMPS.items() if t != "hyde"}, ClassicalAnalyzer())
        try:
            a = await analyze(analyzer, QUERY, [], timeout_s=LOCAL_S, total_timeout_s=2 * LOCAL_S)
            answers["Rewrite"] = ("How does reciprocal rank fusion (RRF) work, and why is cross-encoder", "length")
            cut = await analyze(analyzer, QUERY, [], timeout_s=LOCAL_S, total_timeout_s=2 * LOCAL_S)
        finally:
            await model.close()
    assert a.rewritten is None and "rewrite" in a.not_applicable  # its one line was the preamble's query
    assert a.reformulations == ["RRF explained"]  # not the query, once, and not the line max_tokens cut
    assert a.sub_queries == ["How does RRF work?", "Why is reranking slow?"]
    assert cut.rewritten is None and "cut short" in cut.not_applicable["rewrite"]


async def _analysed(technique: str, query: str, answer: str | Callable[[str], str]) -> Any:
    """What ``technique`` made of ``query`` when the model answered ``answer`` (or what ``answer``
    made of the prompt it was sent); None when it had nothing to offer (NotApplicable)."""
    def handler(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        text = answer(body["messages"][1]["content"]) if callable(answer) else answer
        return 200, {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}

    with json_server(handler) as server:
        model = OpenAICompatibleChat(server.url, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({technique: TechniqueModel(model, 0.3)}, ClassicalAnalyzer())
        try:
            return await (analyzer.reformulate(query, ["feedback"]) if technique == "reformulate" else getattr(analyzer, technique)(query))
        except NotApplicable:
            return None
        finally:
            await model.close()


@pytest.mark.parametrize(
    ("technique", "answer", "expected"),
    [
        ("rewrite", "**Rewritten query:**\nHow does reciprocal rank fusion (RRF) work?", "How does reciprocal rank fusion (RRF) work?"),
        ("rewrite", "### Rewritten query\nHow does reciprocal rank fusion (RRF) work?", "How does reciprocal rank fusion (RRF) work?"),
        ("rewrite", "**How does reciprocal rank fusion (RRF) work?**", "How does reciprocal rank fusion (RRF) work?"),
        ("rewrite", "__init__ versus __new__ reranking", "__init__ versus __new__ reranking (RRF)"),  # its markers inside: no emphasis
        ("decompose", "**Sub-questions:**\n* How does RRF work?\n* Why is reranking slow?", ["How does RRF work?", "Why is reranking slow?"]),
        ("decompose", "## Sub-questions\n1. How does RRF work?\n2. Why is reranking slow?", ["How does RRF work?", "Why is reranking slow?"]),
        ("decompose", "None.\nThe question has only one part.", None),
    ],
    ids=["bold-label", "heading", "bold-line", "dunder-names", "bold-heading-and-bullets", "heading-and-numbers", "none-with-a-stop"],
)
async def test_markdown_around_the_models_lines_is_not_searched(technique: str, answer: str, expected: object) -> None:
    """A heading in Markdown ("**Rewritten query:**", "### Sub-questions") ended in "**" or in no
    colon at all: it replaced the query in every leg, or became a sub-query; "None." was one too."""
    assert await _analysed(technique, QUERY, answer) == expected


@pytest.mark.parametrize(
    ("query", "rewrite", "searched"),
    [
        ('Why does E1234 come from parse_config with "strict mode" on?', "Why does the configuration parser fail in strict mode?",
         'Why does the configuration parser fail in strict mode? (E1234 parse_config "strict mode")'),
        ("How does RRF work?", "How does reciprocal rank fusion work?", "How does reciprocal rank fusion work? (RRF)"),
        ("How does RRF work?", "How does reciprocal rank fusion (rrf) work?", "How does reciprocal rank fusion (rrf) work?"),
        ('errors about "disk full" on NAS', '"disk full" errors on network attached storage (NAS)',
         '"disk full" errors on network attached storage (NAS)'),
        ('errors about "disk full" on NAS', 'NAS errors reporting "disk full"', 'NAS errors reporting "disk full"'),
        ("How does RRF work?", '"How does reciprocal rank fusion (RRF) work?"', "How does reciprocal rank fusion (RRF) work?"),
        ("errors about “disk full” on NAS", "storage errors on NAS", 'storage errors on NAS ("disk full")'),
        ("errors about «disk full» on NAS", "NAS errors reporting “disk full”", "NAS errors reporting “disk full”"),
        ("invoice 20231187 not paid", "unpaid invoice", "unpaid invoice (20231187)"),
        ("why does the upgrade to 3.11 break asyncio", "why does upgrading Python break asyncio", "why does upgrading Python break asyncio (3.11)"),
        ("mail from billing@acme.io about refunds", "emails from the billing team about refunds",
         "emails from the billing team about refunds (billing@acme.io)"),
        ("error at https://acme.io/api/v2/orders?page=2.", "error in the orders API", "error in the orders API (https://acme.io/api/v2/orders?page=2)"),
        ("error at https://acme.io/api/v2/orders", "server error at HTTPS://acme.io/api/v2/orders", "server error at HTTPS://acme.io/api/v2/orders"),
        ("E1234 XK-4471", "error codes E1234 and XK-4471", "error codes E1234 and XK-4471"),
    ],
    ids=["codes-and-a-phrase-dropped", "acronym-expanded-away", "all-kept", "a-phrase-first", "a-phrase-last", "the-line-quoted",
         "typographic-quotes-dropped", "guillemets-kept-as-curly-quotes", "a-number-dropped", "a-version-dropped", "an-email-dropped",
         "a-url-dropped-whole", "a-url-kept", "a-query-of-codes-only"],
)
async def test_a_rewrite_keeps_the_querys_codes_and_quoted_phrases(query: str, rewrite: str, searched: str) -> None:
    """The rewrite replaces the query in every leg: a code, number, version, address or quoted
    phrase the model dropped was no longer searched for as the documents write it."""
    reply = {"choices": [{"message": {"role": "assistant", "content": rewrite}, "finish_reason": "stop"}]}
    with json_server(lambda path, body: (200, reply)) as server:
        model = OpenAICompatibleChat(server.url, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({"rewrite": TechniqueModel(model, 0.3)}, ClassicalAnalyzer())
        try:
            assert await analyzer.rewrite(query) == searched
        finally:
            await model.close()
    assert "Keep every code" in server.requests[0][1]["messages"][1]["content"]


@pytest.mark.parametrize(
    ("technique", "answer"),
    [("rewrite", "How does RRF work"), ("rewrite", "how does RRF work ?"), ("decompose", "How does RRF work and why is reranking slow\nHow does RRF work and why is reranking slow.")],
    ids=["rewrite-without-its-mark", "rewrite-with-a-mark-apart", "sub-queries-differing-in-their-mark"],
)
async def test_a_line_differing_only_in_its_final_mark_is_no_other_query(technique: str, answer: str) -> None:
    """A rewrite that only dropped the query's "?" was embedded as a change, and a sub-question
    repeated with "." for "?" searched twice."""
    assert await _analysed(technique, QUERY if technique == "decompose" else "How does RRF work?", answer) is None


def _echo(prompt: str) -> str:
    return prompt


@pytest.mark.parametrize(
    ("technique", "answer", "expected"),
    [
        ("rewrite", "Certainly.\n\nHow does reciprocal rank fusion (RRF) work?", "How does reciprocal rank fusion (RRF) work?"),
        ("rewrite", "Sure! Here's a clearer version of your query.\nHow does reciprocal rank fusion (RRF) work?",
         "How does reciprocal rank fusion (RRF) work?"),
        ("rewrite", "Rewritten query: How does reciprocal rank fusion (RRF) work?", None),
        ("rewrite", "?", None),
        ("rewrite", "...\nCertainly.", None),
        ("rewrite", _echo, None),
        ("rewrite", "Comment fonctionne la fusion des classements ?", None),  # another language: no word in common
        ("rewrite", "Comment fonctionne RRF ?", None),  # another language, the acronym written alike
        # in English, sharing only the acronym it spells out
        ("rewrite", "How does Reciprocal Rank Fusion (RRF) combine several ranked lists?",
         "How does Reciprocal Rank Fusion (RRF) combine several ranked lists?"),
        ("reformulate", _echo, None),
        ("reformulate", "Sure, here you go.\nRRF explained\nQuery: RRF in detail", ["RRF explained"]),
        ("decompose", "1. ?\n2. ...\n3. a", None),
        ("decompose", "Sure! Here are the sub-questions.\nWhat is RRF?\nHow is RRF computed?", ["What is RRF?", "How is RRF computed?"]),
        ("decompose", "Question 1: How does RRF work?\nQuestion 2: Why is reranking slow?", None),
        ("decompose", _echo, None),
        ("hyde", lambda prompt: f"{prompt}\nRRF sums 1/(k + rank) over the lists.", "RRF sums 1/(k + rank) over the lists."),
        ("hyde", _echo, None),
    ],
    ids=["certainly", "sure-heres", "labelled", "a-mark", "dots-and-a-preamble", "prompt-echoed", "another-language", "another-language-keeping-an-acronym",
         "an-acronym-spelled-out",
         "variants-prompt-echoed", "variants-preamble-and-label", "junk-sub-queries", "sub-queries-preamble", "labelled-sub-queries",
         "sub-queries-prompt-echoed", "passage-after-the-prompt", "passage-prompt-echoed"],
)
async def test_a_line_that_is_not_about_the_query_is_not_searched(technique: str, answer: str | Callable[[str], str], expected: object) -> None:
    """A rewrite replaces the query in every leg, and each variant or sub-question is a search: a
    chat preamble, the prompt echoed or a lone "?" became the query, with nothing in the response
    to say so. A line must share a word with the query; none does, and the caller's words are searched."""
    query = "How does RRF work and why is reranking slow?" if technique == "decompose" else "How does RRF work?"
    assert await _analysed(technique, query, answer) == expected


async def test_the_models_sub_questions_in_chinese_are_searched() -> None:
    """Counted between spaces, a Chinese line was one word, under the three a sub-question needs:
    the model's decomposition of a Chinese question was always dropped."""
    query = "什么是RRF？它如何与BM25结合？"
    assert await _analysed("decompose", query, "什么是RRF？\n它如何与BM25结合？") == ["什么是RRF？", "它如何与BM25结合？"]


@pytest.mark.parametrize(
    ("technique", "query", "answer", "expected"),
    [
        ("decompose", "What is HNSW?\nHow does RRF work in hybrid search?", "What is HNSW?\nHow does RRF work in hybrid search?",
         ["What is HNSW?", "How does RRF work in hybrid search?"]),
        ("reformulate", "context:\nhow to rotate TLS certificates",
         "how to renew TLS certificates\nhow to rotate TLS certificates automatically\nTLS certificate rotation steps",
         ["how to renew TLS certificates", "how to rotate TLS certificates automatically", "TLS certificate rotation steps"]),
        ("reformulate", "what is query expansion", "query expansion explained\nQuery: query expansion", ["query expansion explained"]),
    ],
    ids=["sub-questions-of-a-multi-line-query", "variants-of-a-multi-line-query", "a-variant-starting-with-the-label-word"],
)
async def test_a_line_repeating_the_querys_own_line_is_no_echo_of_the_prompt(
    technique: str, query: str, answer: str, expected: list[str]
) -> None:
    """Only the prompt's own words make an echo: a multi-line query's lines counted as prompt
    lines, and a sub-question or variant starting like one of them was dropped (a two-question
    query was "a single question")."""
    def handler(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        return 200, {"choices": [{"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}]}

    with json_server(handler) as server:
        model = OpenAICompatibleChat(server.url, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({technique: TechniqueModel(model, 0.3)}, ClassicalAnalyzer())
        try:
            got = await (analyzer.reformulate(query, []) if technique == "reformulate" else analyzer.decompose(query))
            assert got == expected
        finally:
            await model.close()


@pytest.mark.parametrize(
    ("technique", "expected"),
    [
        ("rewrite", "How does RRF work in hybrid search?"),
        ("reformulate", ["How does RRF work in hybrid search?", "Why is reranking with RRF slow?"]),
        ("hyde", "How does RRF work in hybrid search?\nWhy is reranking with RRF slow?"),
        ("decompose", ["How does RRF work in hybrid search?", "Why is reranking with RRF slow?"]),
    ],
)
async def test_a_model_ignoring_max_tokens_is_cut_to_the_whole_lines_they_hold(technique: str, expected: object) -> None:
    """A model that ignored max_tokens wrote a 6 MB rewrite: it replaced the query in every leg and
    in Metrics.rewritten_query. Its text (here one within the response's limit) keeps the whole
    lines within 16 characters a token of max_tokens, and the cut is reported."""
    runaway = "How does RRF work in hybrid search?\nWhy is reranking with RRF slow?\n" + "RRF rank fusion " * 4_000
    reply = {"choices": [{"message": {"role": "assistant", "content": runaway}, "finish_reason": "stop"}]}
    with json_server(lambda path, body: (200, reply)) as server:
        model = OpenAICompatibleChat(server.url, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({technique: TechniqueModel(model, 0.3)}, ClassicalAnalyzer())
        try:
            a = await analyze(analyzer, QUERY, ["feedback"], timeout_s=LOCAL_S, total_timeout_s=2 * LOCAL_S)
        finally:
            await model.close()
    got = {"rewrite": a.rewritten, "reformulate": a.reformulations, "hyde": a.hyde, "decompose": a.sub_queries}[technique]
    assert got == expected
    assert a.dropped[technique] == "runaway_cut"


async def test_a_rewrite_is_no_longer_than_a_query_may_be() -> None:
    """The rewrite replaces the query, and the query's codes it left out are added back at its end:
    with a long query of codes it outgrew QUERY_MAX_BYTES. It is cut after its last whole word within them."""
    reply = {"choices": [{"message": {"role": "assistant", "content": "How does reciprocal rank fusion work?"}, "finish_reason": "stop"}]}
    with json_server(lambda path, body: (200, reply)) as server:
        model = OpenAICompatibleChat(server.url, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({"rewrite": TechniqueModel(model, 0.3)}, ClassicalAnalyzer(), query_max_bytes=30)
        try:
            assert await analyzer.rewrite("How does RRF work?") == "How does reciprocal rank"
        finally:
            await model.close()


@pytest.mark.parametrize(
    ("technique", "expected"),
    [
        ("rewrite", "Which retrieval system answers search queries best?"),
        ("reformulate", ["Which retrieval system answers search queries best?", "How does a retrieval system rank search queries?"]),
        ("hyde", "Which retrieval system answers search queries best?\nHow does a retrieval system rank search queries?"),
        ("decompose", ["Which retrieval system answers search queries best?", "How does a retrieval system rank search queries?"]),
    ],
)
async def test_the_system_prompt_echoed_is_not_searched(technique: str, expected: object) -> None:
    """Only the user prompt's lines counted as an echo: the system prompt ("You transform search
    queries for a retrieval system. ...") repeated first became the rewrite, a variant and the
    HyDE passage's first line, for a query sharing its words."""
    lines = "Which retrieval system answers search queries best?\nHow does a retrieval system rank search queries?"

    def handler(path: str, body: dict[str, Any]) -> tuple[int, Any]:
        system = body["messages"][0]["content"]
        return 200, {"choices": [{"message": {"role": "assistant", "content": f"{system}\n{lines}"}, "finish_reason": "stop"}]}

    query = "which retrieval system handles search queries best"
    with json_server(handler) as server:
        model = OpenAICompatibleChat(server.url, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({technique: TechniqueModel(model, 0.3)}, ClassicalAnalyzer())
        try:
            got = await (analyzer.reformulate(query, ["feedback"]) if technique == "reformulate" else getattr(analyzer, technique)(query))
        finally:
            await model.close()
    assert got == expected
    assert server.requests[0][1]["messages"][0]["role"] == "system"


@pytest.mark.parametrize(
    ("query", "line"),
    [
        ("what does [^abc] mean in a regex", "[^abc] negated character class in regular expressions"),
        ("python f-string {x!r} meaning", "{x!r} conversion flag in Python f-strings"),
        ("[SOLVED] nginx 502 bad gateway fix", "[SOLVED] nginx 502 bad gateway error fix"),
    ],
    ids=["character-class", "format-conversion", "forum-tag"],
)
async def test_a_line_opening_with_a_bracket_is_searched_unless_it_is_json(query: str, line: str) -> None:
    """Every line opening with "[" or "{" was dropped as an answer's JSON framing."""
    answer = f'{line}\n["{query} explained", "{query} example"]\n{{"variant": "{query} details"}}'
    reply = {"choices": [{"message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}]}
    with json_server(lambda path, body: (200, reply)) as server:
        model = OpenAICompatibleChat(server.url, "m", timeout_s=LOCAL_S, max_retries=0, backoff_s=0)
        analyzer = LlmAnalyzer({"reformulate": TechniqueModel(model, 0.3)}, ClassicalAnalyzer())
        try:
            assert await analyzer.reformulate(query, ["feedback"]) == [line]
        finally:
            await model.close()


@pytest.mark.parametrize(
    ("technique", "answer", "expected"),
    [
        ("rewrite", '{"query": "How does reciprocal rank fusion (RRF) work?"}', "How does reciprocal rank fusion (RRF) work?"),
        ("rewrite", '{\n  "rewritten_query": "How does reciprocal rank fusion (RRF) work?"\n}', "How does reciprocal rank fusion (RRF) work?"),
        ("reformulate", '["RRF explained", "reciprocal rank fusion RRF details", "how RRF combines lists"]',
         ["RRF explained", "reciprocal rank fusion RRF details", "how RRF combines lists"]),
        ("decompose", '["How does RRF work?", "Why is reranking slow?"]', ["How does RRF work?", "Why is reranking slow?"]),
        ("rewrite", '{"rewritten": "How does RRF work in search", "variants": ["RRF explained"]}', None),
        ("rewrite", '{"query": "How does reciprocal rank fusion (RRF) work?"', None),
        ("reformulate", 'RRF explained\n["RRF details", "RRF in search"]', ["RRF explained"]),
    ],
    ids=["one-key-object", "one-key-object-on-lines", "list-of-variants", "list-of-sub-questions", "object-of-several-keys",
         "json-cut-short", "json-after-a-line"],
)
async def test_an_answer_in_json_is_read_for_its_strings(technique: str, answer: str, expected: object) -> None:
    """A model answering in JSON had its text searched verbatim: {"query": "..."} as the rewrite,
    braces and quotes included, and a list of five variants as one variant."""
    assert await _analysed(technique, QUERY if technique == "decompose" else "How does RRF work?", answer) == expected
