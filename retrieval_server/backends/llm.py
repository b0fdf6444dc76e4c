"""Chat-completion clients, one per wire protocol, with retries and backoff.

* OpenAI-compatible ``POST {base}/chat/completions`` (OpenAI, Ollama, vLLM, llama.cpp server)
* Anthropic ``POST {base}/v1/messages``
* Gemini ``POST {base}/v1beta/models/{model}:generateContent``

``stream`` yields the answer's text as the model writes it, over Server-Sent Events (``"stream":
true``; Gemini's ``:streamGenerateContent?alt=sse``). A failed connection is retried until the
first token arrives, never after. A server that ignores ``"stream": true`` and answers one JSON
completion has its text yielded as one piece; any other content type fails at once, unretried
(the provider billed the whole answer).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import datetime
import email.utils
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from retrieval_server.backends.circuit_breaker import CircuitBreaker, refused_by_breaker
from retrieval_server.backends.http_body import (
    ACCEPT_ENCODING,
    BoundedText,
    ResponseRefused,
    ResponseTooLarge,
    error_value,
    failure_text,
    read_whole,
    request_bounded,
    response_limit,
    unpooled_client,
    within,
)
from retrieval_server.identifiers import without_surrogates
from retrieval_server.observability.log_limit import LogLimit

if TYPE_CHECKING:
    from httpx_sse import ServerSentEvent

# httpx (which also imports rich and pygments when they are installed) is imported where a client
# is made or used: a process without an LLM configured never needs it.

log = logging.getLogger(__name__)

_RETRYABLE = {408, 409, 425, 429, 500, 502, 503, 504, 529}
#: statuses that refuse one request for what it holds (a prompt over the context window, content
#: the provider will not take), not the provider failing
_REQUEST_REFUSED = {400, 413, 422}
#: how much of a provider's own error text an error repeats: it is the provider's, of any length
_SAID = 200
#: credentials of known shapes in a provider's text, besides the configured key's value: a bearer
#: token, OpenAI's and Anthropic's ``sk-...``, Google's ``AIza...``
_KEY_LIKE = re.compile(r"(?i:bearer)\s+[^\s\"',;}]+|\bsk-[\w-]{8,}|\bAIza[\w-]{30,}")
_REDACTED = "[redacted]"
#: characters a token of a model's text spans at most in practice: English averages about 4, and
#: the longest tokens of common vocabularies (runs of white space or punctuation) about 16. A model
#: ignoring max_tokens wrote 7.9 MB (a degenerate repetition), and its check held the event loop
#: for a minute: its text is cut at max_tokens times this, its response read no further than
#: :func:`answer_limit`.
CHARS_PER_TOKEN = 16
#: bytes a token's text takes at most in a response's JSON: every character a ``\uXXXX`` escape
_JSON_BYTES_PER_TOKEN = CHARS_PER_TOKEN * 6


#: when the caller stops waiting for the model calls made in this context, on the event loop's
#: clock (None: it does not say); see :func:`waited_for`
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("llm_deadline", default=None)


@contextlib.contextmanager
def waited_for(seconds: float) -> Iterator[None]:
    """Model calls started within (tasks created within, which copy the context) are waited for
    ``seconds`` from now: a retry's backoff that would end after that is not started, and the
    failure before it is the call's answer at once, counted by the breaker."""
    token = _deadline.set(asyncio.get_running_loop().time() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def answer_limit(max_tokens: int) -> int:
    """The size a response answering with ``max_tokens`` is read to (a streamed one's each event):
    past it the model ignored max_tokens by far, or the body is no answer."""
    return response_limit(max_tokens * _JSON_BYTES_PER_TOKEN)


class LlmError(Exception):
    """The model could not answer (after retries). ``provider_error``: the ``error`` object of the
    provider's answer, when it sent one."""

    def __init__(self, message: str, provider_error: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.provider_error = provider_error or {}


class LlmRefused(LlmError):
    """The provider refused this request for its content (400, 413, 422).

    Not held against the provider's circuit breaker: otherwise one caller's oversized query, sent
    to the four analysis techniques at once, would open the breaker for every caller."""


def log_failure(logger: logging.Logger, log_limit: LogLimit, what: str, exc: BaseException, instead: str, *, key: str | None = None) -> None:
    """Log a request's failed model call, ``what`` (a technique, the router, the answer), done
    ``instead`` another way: WARNING once per ``log_limit.every_s`` per caller (``key``, by default
    ``what``) and error kind, the rest DEBUG. Only the open breaker's refusals are never logged
    above DEBUG: the breaker logs its opening and closing. A failure it counts is not left to it:
    it counts consecutive failures of every caller of the provider, so a call failing every time
    (an answer cut at its max_tokens with no text, a gateway that cannot stream) beside the
    router's successes never opens it, and showed nowhere. ``stacklevel``: the line names the
    caller, not this function."""
    kind = type(exc).__name__
    # The refusal first: it must not take the line a failure of the model is due.
    if refused_by_breaker(exc) or not log_limit.due((key or what, kind)):
        logger.debug("%s failed: %s: %s; %s", what, kind, exc, instead, stacklevel=2)
    else:
        logger.warning("%s failed: %s: %s; %s (logged once per %.0f s per error kind)", what, kind, exc, instead, log_limit.every_s,
                       stacklevel=2)


class _WholeAnswer(Exception):
    """A streamed call answered with one JSON completion: ``data``, to be read as ``complete`` reads it."""

    def __init__(self, data: Any) -> None:
        super().__init__("a whole completion instead of a stream")
        self.data = data


class Completion(str):
    """A model's text. ``truncated``: it stopped short, not where the model ended it (at
    ``max_tokens``, or by a provider's filter: see ``_OPENAI_FINISHED`` and the others), so its
    last sentence may be cut.

    A string, so that whoever only needs the text reads it as one. A stream reports a cut (or an
    end before the model's: no finish reason, no end event) by yielding an empty, truncated
    Completion last."""

    truncated: bool = False

    @staticmethod
    def of(text: str, truncated: bool) -> Completion:
        # JSON may hold half an emoji ("\\ud83d"), which protobuf cannot send: Query failed INTERNAL.
        completion = Completion(without_surrogates(text))
        completion.truncated = truncated
        return completion


def retry_after_seconds(retry_after: str | None) -> float | None:
    """A ``Retry-After`` header's wait: delay-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not retry_after:
        return None
    try:
        return max(0.0, float(retry_after))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(retry_after)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds())


def _too_late(delay: float) -> bool:
    """Whether a backoff of ``delay`` seconds ends after the caller stops waiting (:func:`waited_for`)."""
    deadline = _deadline.get()
    return deadline is not None and asyncio.get_running_loop().time() + delay >= deadline


def _error_body(response: Any) -> dict[str, Any]:
    """The ``error`` object of a provider's error response (OpenAI, Anthropic and Gemini all send
    ``{"error": {...}}``); empty when there is none."""
    error = error_value(response)
    return error if isinstance(error, dict) else {}


def _names_the_credentials(error: dict[str, Any]) -> bool:
    """Whether an error refuses the caller's key, not the request's content: Gemini answers an
    invalid API key with 400 (``details[].reason`` ``API_KEY_INVALID``), which must count against
    the breaker like any provider's 401, or a wrong key would never show in Health."""
    details = error.get("details") if isinstance(error.get("details"), list) else []
    reasons = [str(d.get("reason", "")) for d in details if isinstance(d, dict)]
    return any("API_KEY" in r for r in reasons) or error.get("status") in ("UNAUTHENTICATED", "PERMISSION_DENIED")


class ChatModel(Protocol):
    name: str

    async def complete(self, system: str, prompt: str, *, temperature: float, max_tokens: int = 256) -> str: ...

    def stream(self, system: str, prompt: str, *, temperature: float, max_tokens: int = 256) -> AsyncIterator[str]: ...

    def gave_up(self) -> None:
        """A call was cancelled for taking too long: the provider's failure (its breaker counts it;
        a cancellation alone is no verdict)."""

    async def close(self) -> None: ...


class _HttpChat:
    name = "llm"

    def __init__(
        self, base_url: str, *, timeout_s: float, max_retries: int, backoff_s: float, headers: dict[str, str],
        api_key: str | None, breaker: CircuitBreaker | None = None,
    ) -> None:
        self._client = unpooled_client(base_url=base_url.rstrip("/"), timeout=timeout_s, headers=headers)
        # The key's value where it stands alone: a placeholder key ("e", "x", "EMPTY") was replaced
        # inside every word of a provider's text ("HTTP 503 S[redacted]rvic[redacted] ...").
        self._key = re.compile(rf"(?<![\w-]){re.escape(api_key)}(?![\w-])") if api_key else None
        self._timeout_s = timeout_s
        self._retries = max_retries
        self._backoff = backoff_s
        self._breaker = breaker or CircuitBreaker()

    def gave_up(self) -> None:
        self._breaker.record_failure(TimeoutError(f"{self.name}: a call cut at its time limit"))

    def _refused(self) -> LlmError:
        return LlmError(f"{self.name}: circuit open after repeated failures")

    def _said(self, text: object, limit: int | None = _SAID) -> str:
        """The server's ``text``, for an error or a log line: without the API key (a server echoing
        the request's headers put "Bearer sk-..." in the log), then cut to ``limit``, so that no cut
        leaves a piece of a key that redaction would not know (None: not cut)."""
        said = str(text)
        if self._key:
            said = self._key.sub(_REDACTED, said)
        return _KEY_LIKE.sub(_REDACTED, said)[:limit]

    async def _post(self, path: str, body: dict[str, Any], max_tokens: int, params: dict[str, str] | None = None) -> Completion:
        """One call's text, retried on what is worth retrying; while the provider keeps failing (the
        breaker is open) calls fail at once, so every request does not pay the timeout.

        The text is read inside the breaker: a provider answering 200 with JSON that holds no
        completion (a gateway's error object, a wrong base URL) fails every call, and counted as a
        success it kept the breaker closed and Health reporting the LLM OK."""
        with self._breaker.calling(self._refused, neutral=(LlmRefused,)):
            return self._completion(await self._post_with_retries(path, body, params, max_tokens))

    def stream(self, system: str, prompt: str, *, temperature: float, max_tokens: int = 256) -> AsyncIterator[str]:
        """The answer's text as the model writes it, behind the same breaker as :meth:`_post`: a
        streamed answer is the same provider, and while it is down must not pay its timeout either."""
        return self._guarded(self._stream(system, prompt, temperature=temperature, max_tokens=max_tokens))

    async def _guarded(self, tokens: AsyncIterator[str]) -> AsyncIterator[str]:
        """A stream of no words (a proxy's empty 200, a model that spent max_tokens thinking) fails
        inside the breaker's count, as a whole answer of no text does: as a success it kept the
        breaker closed while every answer said nothing."""
        with self._breaker.calling(self._refused, neutral=(LlmRefused,)):
            wrote = False
            try:
                async with contextlib.aclosing(tokens):  # type: ignore[type-var]
                    async for token in tokens:
                        wrote = wrote or bool(token.strip())
                        yield without_surrogates(token)
            except _WholeAnswer as whole:
                completion = self._completion(whole.data)
                wrote = bool(completion.strip())
                yield completion
            if not wrote:
                raise LlmError(f"{self.name}: the stream ended with no text")

    def _stream(self, system: str, prompt: str, *, temperature: float, max_tokens: int) -> AsyncIterator[str]:
        raise NotImplementedError

    def _completion(self, data: Any) -> Completion:
        """The text of a whole (not streamed) response's JSON."""
        raise NotImplementedError

    async def _post_with_retries(self, path: str, body: dict[str, Any], params: dict[str, str] | None, max_tokens: int) -> Any:
        import httpx

        for attempt in range(self._retries + 1):
            try:
                resp = await request_bounded(self._client, "POST", path, json=body, params=params, limit=answer_limit(max_tokens))
                if resp.status_code in _RETRYABLE and attempt < self._retries:
                    raise httpx.HTTPStatusError(f"retryable {resp.status_code}", request=resp.request, response=resp)
                resp.raise_for_status()
                return resp.json()
            except (httpx.TransportError, httpx.HTTPStatusError) as exc:
                status = exc.response.status_code if isinstance(exc, httpx.HTTPStatusError) else None
                delay = self._retry_delay(exc, attempt)
                if attempt == self._retries or (status is not None and status not in _RETRYABLE) or delay is None or _too_late(delay):
                    raise self._error(exc, status) from None  # httpx's text names the URL: see failure_text
                await self._back_off(exc, attempt, delay)
            except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested past the parser's depth
                raise LlmError(f"{self.name}: invalid JSON: {exc}") from exc
            except ResponseTooLarge as exc:
                raise LlmError(f"{self.name}: {exc} for max_tokens {max_tokens}") from exc
            except ResponseRefused as exc:
                raise LlmError(f"{self.name}: {exc}") from exc
        raise AssertionError("unreachable")

    async def _events(
        self, path: str, body: dict[str, Any], max_tokens: int, params: dict[str, str] | None = None
    ) -> AsyncIterator[ServerSentEvent]:
        """The response's Server-Sent Events; connection failures are retried until the first event.
        A whole JSON completion instead of them is raised as :class:`_WholeAnswer`, for :meth:`_guarded`.
        The stream is read up to MAX_RESPONSE_BYTES (its events are parsed one at a time), each event
        and a body read whole to :func:`answer_limit`."""
        import httpx
        from httpx_sse import EventSource

        headers = {**ACCEPT_ENCODING, "Accept": "text/event-stream", "Cache-Control": "no-store"}
        limit = answer_limit(max_tokens)
        for attempt in range(self._retries + 1):
            started = False
            try:
                async with self._client.stream("POST", path, json=body, params=params, headers=headers) as response:
                    # The bodies read whole here are held to the timeout whole, as complete()'s are.
                    if not response.is_success:  # a redirect too: not followed, told by its status as complete() tells it
                        async with within(self._timeout_s):
                            error = await read_whole(response, limit)
                        error.raise_for_status()
                    content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
                    if content_type != "text/event-stream":
                        # Not retried: a server that ignores "stream": true bills the whole answer each time.
                        if content_type != "application/json":
                            raise LlmError(f"{self.name}: a streamed answer came as {content_type or 'no content type'!r}, "
                                           "not text/event-stream")
                        try:
                            async with within(self._timeout_s):
                                data = (await read_whole(response, limit)).json()
                        except (ValueError, RecursionError) as exc:
                            raise LlmError(f"{self.name}: invalid JSON: {exc}") from exc
                        raise _WholeAnswer(data)
                    # The body counted as it arrives, before the parser holds a line or an event whole.
                    async for event in EventSource(BoundedText(response)).aiter_sse():  # type: ignore[arg-type]
                        if len(event.data) > limit:
                            raise ResponseTooLarge(f"a streamed event of {len(event.data)} characters, above the limit of {limit} bytes")
                        started = True
                        yield event
                return
            except ResponseTooLarge as exc:
                raise LlmError(f"{self.name}: {exc} for max_tokens {max_tokens}") from exc
            except ResponseRefused as exc:
                raise LlmError(f"{self.name}: {exc}") from exc
            except (httpx.TransportError, httpx.HTTPStatusError) as exc:
                status = exc.response.status_code if isinstance(exc, httpx.HTTPStatusError) else None
                delay = None if started else self._retry_delay(exc, attempt)
                if attempt == self._retries or (status is not None and status not in _RETRYABLE) or delay is None or _too_late(delay):
                    raise self._error(exc, status) from None  # httpx's text names the URL: see failure_text
                await self._back_off(exc, attempt, delay)

    async def _back_off(self, exc: Exception, attempt: int, delay: float) -> None:
        """The wait after a failed attempt. The attempt failed: a caller that stops waiting during
        the wait leaves that failure counted. Thrown away with the cancellation (no verdict, see
        :meth:`CircuitBreaker.calling`), an LLM refusing connections to callers whose deadlines
        end within the backoff never opened its breaker, and every query paid the backoff."""
        said = f"{self.name}: {self._said(failure_text(exc), None)}"
        # Each call's retries, while the provider is down: its breaker logs when it opens.
        log.debug("%s; retrying in %.2f s (attempt %d)", said, delay, attempt + 1)
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self._breaker.record_failure(LlmError(said))
            raise

    def _retry_delay(self, exc: Exception, attempt: int) -> float | None:
        """Seconds before the next attempt: the backoff, or longer when the server says when to come
        back (``Retry-After``). None when waiting cannot help: the server asks for more than a call's
        timeout, the account is out of quota (OpenAI's 429 ``insufficient_quota``), or the call let
        its timeout pass (the whole call's is a ReadTimeout): asked again, the provider would keep
        the caller as long again, and bill a completion it may be writing still. Only a connection
        not made (ConnectTimeout, PoolTimeout) is no call the provider received."""
        import httpx

        delay = self._backoff * 2**attempt
        if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout)):
            return None
        if not isinstance(exc, httpx.HTTPStatusError):
            return delay
        response = exc.response
        if response.status_code == 429 and _error_body(response).get("code") == "insufficient_quota":
            return None
        asked = retry_after_seconds(response.headers.get("retry-after"))
        if asked is None:
            return delay
        return max(delay, asked) if asked <= self._timeout_s else None

    def _error(self, exc: Exception, status: int | None) -> LlmError:
        import httpx

        error = _error_body(exc.response) if isinstance(exc, httpx.HTTPStatusError) else {}
        refused = status in _REQUEST_REFUSED and not _names_the_credentials(error)
        return (LlmRefused if refused else LlmError)(f"{self.name}: {self._said(failure_text(exc), None)}", error)

    def _failed_mid_stream(self, data: Any) -> LlmError | None:
        """The provider's failure after its 200, sent as an event of ``{"error": ...}`` (OpenAI,
        Gemini): its words, cut to :data:`_SAID`, not "unexpected streamed event shape"."""
        error = data.get("error") if isinstance(data, dict) else None
        if not error:
            return None
        said = (error.get("message") or error) if isinstance(error, dict) else error
        return LlmError(f"{self.name}: {self._said(said)}", error if isinstance(error, dict) else None)

    @staticmethod
    def _json(event: ServerSentEvent, name: str) -> Any:
        try:
            return json.loads(event.data)
        except (ValueError, RecursionError) as exc:
            raise LlmError(f"{name}: invalid JSON in a streamed event") from exc

    async def close(self) -> None:
        await self._client.aclose()


# Why a model stopped when its text is whole. Any other reason stops it short: max_tokens, and
# also a provider's filter (OpenAI "content_filter", Anthropic "refusal", Gemini "SAFETY",
# "RECITATION", ...), which can stop a stream mid-sentence. None: a response that gives no reason
# (OpenAI-compatible servers may not); a stream that ends without one is cut (below).
# "done": [DONE] with no reason before it; "eos_token" and "stop_sequence": Hugging Face TGI's
# OpenAI-compatible API ends a whole text with them.
_OPENAI_FINISHED = frozenset({"stop", "eos_token", "stop_sequence", "done", None})
_ANTHROPIC_FINISHED = frozenset({"end_turn", "stop_sequence", "message_stop", None})
_GEMINI_FINISHED = frozenset({"STOP", None})
#: Gemini's finish reasons for a candidate its filters stopped: a refusal of this request's content
_GEMINI_REFUSED = frozenset({"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"})


def _finished(reason: object, finished: frozenset[str | None]) -> bool:
    """Whether the model ended its text itself; a reason that is no string (a list, an object) is
    no known one, and was looked up in the set (TypeError: unhashable)."""
    return (reason is None or isinstance(reason, str)) and reason in finished


def _refused_parameter(error: dict[str, Any]) -> str | None:
    """The request parameter an OpenAI 400 says this model does not take at all, of those a request
    can do without: ``max_tokens`` (reasoning models, o1 to gpt-5, take ``max_completion_tokens``)
    or a ``temperature`` other than the default. OpenAI names it in ``param`` with the code
    ``unsupported_parameter`` or ``unsupported_value``; a proxy may only say so in the message. A
    value out of range (``invalid_value``: max_tokens over the model's limit) is not one."""
    param, code, message = error.get("param"), error.get("code"), str(error.get("message", ""))
    if param in ("max_tokens", "temperature") and code in ("unsupported_parameter", "unsupported_value"):
        return str(param)
    if "'max_tokens'" in message and "max_completion_tokens" in message:
        return "max_tokens"
    return None


class OpenAICompatibleChat(_HttpChat):
    """OpenAI's chat completions. Sends ``max_tokens``, which OpenAI-compatible servers (Ollama,
    vLLM, llama.cpp, TGI) take; a model that refuses it, or a temperature, with a 400 naming the
    parameter gets ``max_completion_tokens`` (or the default temperature) from then on, the call
    sent again once."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, **kw: Any) -> None:
        super().__init__(base_url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {}, api_key=api_key, **kw)
        self._model = model
        self.name = f"openai:{model}"
        self._refuses: set[str] = set()

    def _body(self, system: str, prompt: str, *, temperature: float, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
        }
        if "temperature" not in self._refuses:
            body["temperature"] = temperature
        body["max_completion_tokens" if "max_tokens" in self._refuses else "max_tokens"] = max_tokens
        return body

    def _learned(self, exc: LlmRefused, sent: dict[str, Any]) -> bool:
        """Whether the refusal names a parameter this client can leave out and ``sent`` (the
        refused body) held: then the call is worth sending again without it. Another call sent
        before the first refusal came back is refused too, and sent again as well."""
        param = _refused_parameter(exc.provider_error)
        if param is None or param not in sent:
            return False
        if param not in self._refuses:
            self._refuses.add(param)
            log.info("%s: the model refuses %s; sending %s from now on", self.name, param,
                     "max_completion_tokens" if param == "max_tokens" else "the default temperature")
        return True

    async def complete(self, system: str, prompt: str, *, temperature: float, max_tokens: int = 256) -> str:
        while True:
            body = self._body(system, prompt, temperature=temperature, max_tokens=max_tokens)
            try:
                return await self._post("/chat/completions", body, max_tokens)
            except LlmRefused as exc:
                if not self._learned(exc, body):
                    raise

    def _completion(self, data: Any) -> Completion:
        try:
            choice = data["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise LlmError(f"{self.name}: unexpected response shape") from exc
        if not isinstance(content, str) or not content.strip():
            # null or "" when the model wrote no text (a refusal, a tool call, max_tokens spent
            # reasoning): str() of null would be the words "None", searched for and answered with,
            # and "" an answer of no words that kept the breaker closed. A refusal of this
            # request's content is no failure of the provider (see LlmRefused).
            finish = choice.get("finish_reason")
            if (choice.get("message") or {}).get("refusal") or finish == "content_filter":
                raise LlmRefused(f"{self.name}: the model refused this request's content")
            raise LlmError(f"{self.name}: the response has no text (finish_reason {self._said(finish, 40)})")
        return Completion.of(content, not _finished(choice.get("finish_reason"), _OPENAI_FINISHED))

    async def _stream(self, system: str, prompt: str, *, temperature: float, max_tokens: int) -> AsyncIterator[str]:
        wrote = refused = False
        while True:
            body = {**self._body(system, prompt, temperature=temperature, max_tokens=max_tokens), "stream": True}
            try:
                finish = None
                async for event in self._events("/chat/completions", body, max_tokens):
                    if event.data.strip() == "[DONE]":
                        finish = finish or "done"
                        break
                    data = self._json(event, self.name)
                    if failure := self._failed_mid_stream(data):
                        raise failure
                    try:
                        choices = data["choices"]
                        delta = (choices[0].get("delta") or {}) if choices else {}
                        text = delta.get("content")
                        # OpenAI streams a refusal as delta.refusal pieces, content null, and ends it with "stop".
                        refused = refused or bool(delta.get("refusal"))
                        finish = (choices[0].get("finish_reason") if choices else None) or finish
                    except (KeyError, IndexError, TypeError, AttributeError) as exc:
                        raise LlmError(f"{self.name}: unexpected streamed event shape") from exc
                    if text and not isinstance(text, str):
                        raise LlmError(f"{self.name}: unexpected streamed event shape (content {type(text).__name__})")
                    if text:
                        # Blank pieces are no answer (_guarded counts only words): a refusal after them is still one.
                        wrote = wrote or bool(text.strip())
                        yield text
                break
            except LlmRefused as exc:  # an error status, before any event
                if not self._learned(exc, body):
                    raise
        if not wrote and (finish == "content_filter" or refused):  # as complete() has it: counted neither way
            raise LlmRefused(f"{self.name}: the model refused this request's content")
        if finish is None or not _finished(finish, _OPENAI_FINISHED):
            yield Completion.of("", True)  # stopped short (max_tokens, a filter), or the stream ended before the model did


class AnthropicChat(_HttpChat):
    def __init__(self, base_url: str, model: str, api_key: str | None = None, **kw: Any) -> None:
        super().__init__(base_url, headers={"x-api-key": api_key or "", "anthropic-version": "2023-06-01"}, api_key=api_key, **kw)
        self._model = model
        self.name = f"anthropic:{model}"

    async def complete(self, system: str, prompt: str, *, temperature: float, max_tokens: int = 256) -> str:
        return await self._post(
            "/v1/messages",
            {
                "model": self._model,
                "system": system,
                "messages": [{"role": "user", "content": prompt}],
                "temperature": temperature,
                "max_tokens": max_tokens,
            },
            max_tokens,
        )

    def _completion(self, data: Any) -> Completion:
        try:
            text = "".join(block["text"] for block in data["content"] if block.get("type") == "text")
        except (KeyError, TypeError, AttributeError) as exc:
            raise LlmError(f"{self.name}: unexpected response shape") from exc
        stop = data.get("stop_reason")
        if not text.strip():  # as OpenAI's empty content: max_tokens spent thinking, or a refusal
            if stop == "refusal":
                raise LlmRefused(f"{self.name}: the model refused this request's content (stop_reason refusal)")
            raise LlmError(f"{self.name}: the response has no text (stop_reason {self._said(stop, 40)})")
        return Completion.of(text, not _finished(stop, _ANTHROPIC_FINISHED))

    async def _stream(self, system: str, prompt: str, *, temperature: float, max_tokens: int) -> AsyncIterator[str]:
        body = {
            "model": self._model,
            "system": system,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": temperature,
            "max_tokens": max_tokens,
            "stream": True,
        }
        stop, wrote = None, False
        async for event in self._events("/v1/messages", body, max_tokens):
            if event.event == "message_stop":
                stop = stop or "message_stop"
                break
            if event.event == "error":
                raise LlmError(f"{self.name}: {self._said(event.data)}")
            if event.event == "content_block_delta":
                delta = self._delta(event)
                if delta.get("type") == "text_delta" and delta.get("text"):
                    if not isinstance(delta["text"], str):
                        raise LlmError(f"{self.name}: unexpected streamed event shape (text {type(delta['text']).__name__})")
                    wrote = wrote or bool(delta["text"].strip())  # as OpenAI's
                    yield delta["text"]
            elif event.event == "message_delta":
                stop = self._delta(event).get("stop_reason") or stop
        if not wrote and stop == "refusal":  # as complete() has it: counted neither way
            raise LlmRefused(f"{self.name}: the model refused this request's content (stop_reason refusal)")
        if stop is None or not _finished(stop, _ANTHROPIC_FINISHED):
            yield Completion.of("", True)  # stopped short (max_tokens, a refusal), or the stream ended before the model did

    def _delta(self, event: ServerSentEvent) -> dict[str, Any]:
        """The event's ``delta`` object; an event or a delta that is no object is a malformed stream."""
        data = self._json(event, self.name)
        delta = (data.get("delta") or {}) if isinstance(data, dict) else None
        if not isinstance(delta, dict):
            raise LlmError(f"{self.name}: unexpected streamed event shape")
        return delta


class GeminiChat(_HttpChat):
    def __init__(self, base_url: str, model: str, api_key: str | None = None, **kw: Any) -> None:
        super().__init__(base_url, headers={"x-goog-api-key": api_key or ""}, api_key=api_key, **kw)
        self._model = model
        self.name = f"gemini:{model}"

    async def complete(self, system: str, prompt: str, *, temperature: float, max_tokens: int = 256) -> str:
        return await self._post(
            f"/v1beta/models/{self._model}:generateContent",
            {
                "systemInstruction": {"parts": [{"text": system}]},
                "contents": [{"role": "user", "parts": [{"text": prompt}]}],
                "generationConfig": {"temperature": temperature, "maxOutputTokens": max_tokens},
            },
            max_tokens,
        )

    def _refusal(self, data: Any, finish: object = None) -> LlmRefused | None:
        """The refusal of this request's content that a response, whole or a streamed chunk,
        holds: the prompt blocked (``promptFeedback.blockReason``: no candidates at all), or a
        candidate's ``finish`` that says a filter stopped it before any text."""
        feedback = data.get("promptFeedback") if isinstance(data, dict) else None
        blocked = feedback.get("blockReason") if isinstance(feedback, dict) else None
        if blocked:
            return LlmRefused(f"{self.name}: the model refused this request's content (blockReason {self._said(blocked, 40)})")
        if isinstance(finish, str) and finish in _GEMINI_REFUSED:
            return LlmRefused(f"{self.name}: the model refused this request's content (finishReason {finish})")
        return None

    def _completion(self, data: Any) -> Completion:
        if refusal := self._refusal(data):
            raise refusal
        try:
            candidate = data["candidates"][0]
            parts = (candidate.get("content") or {}).get("parts")
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LlmError(f"{self.name}: unexpected response shape") from exc
        finish = candidate.get("finishReason")
        try:
            text = "".join(p.get("text", "") for p in parts) if isinstance(parts, list) else ""
        except (TypeError, AttributeError) as exc:
            raise LlmError(f"{self.name}: unexpected response shape") from exc
        if not text.strip():
            # No content, or no words in it: the model stopped before writing (its thinking spent
            # maxOutputTokens, a filter). A failure, as OpenAI's empty content is, not an answer of
            # no words; but a filter's stop refuses this request's content, no failure of the provider.
            raise self._refusal(data, finish) or LlmError(f"{self.name}: the response has no text (finishReason {self._said(finish, 40)})")
        return Completion.of(text, not _finished(finish, _GEMINI_FINISHED))

    async def _stream(self, system: str, prompt: str, *, temperature: float, max_tokens: int) -> AsyncIterator[str]:
        body = {
            "systemInstruction": {"parts": [{"text": system}]},
            "contents": [{"role": "user", "parts": [{"text": prompt}]}],
            "generationConfig": {"temperature": temperature, "maxOutputTokens": max_tokens},
        }
        finish, wrote = None, False
        async for event in self._events(f"/v1beta/models/{self._model}:streamGenerateContent", body, max_tokens, params={"alt": "sse"}):
            data = self._json(event, self.name)
            if failure := self._failed_mid_stream(data):
                raise failure
            if refusal := self._refusal(data):  # as complete() has it: counted neither way
                raise refusal
            try:
                candidate = data["candidates"][0]
                # The last chunk may carry only why the model stopped, without content.
                text = "".join(p.get("text", "") for p in (candidate.get("content") or {}).get("parts", ()))
            except (KeyError, IndexError, TypeError, AttributeError) as exc:
                raise LlmError(f"{self.name}: unexpected streamed event shape") from exc
            if text:
                wrote = wrote or bool(text.strip())  # as OpenAI's
                yield text
            finish = candidate.get("finishReason") or finish
        if not wrote and (refusal := self._refusal(None, finish)):
            raise refusal
        if finish is None or not _finished(finish, _GEMINI_FINISHED):
            yield Completion.of("", True)  # stopped short (MAX_TOKENS, SAFETY, ...), or the stream ended before the model did


PROVIDERS = {"openai": OpenAICompatibleChat, "anthropic": AnthropicChat, "gemini": GeminiChat}
