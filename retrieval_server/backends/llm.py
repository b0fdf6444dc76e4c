"""Chat-completion clients for query analysis, one per wire protocol, with retries and backoff.

* OpenAI-compatible ``POST {base}/chat/completions`` (OpenAI, Ollama, vLLM, llama.cpp server)
* Anthropic ``POST {base}/v1/messages``
* Gemini ``POST {base}/v1beta/models/{model}:generateContent``
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

import httpx

from retrieval_server.backends.circuit_breaker import CircuitBreaker

log = logging.getLogger(__name__)

_RETRYABLE = {408, 409, 425, 429, 500, 502, 503, 504, 529}


class LlmError(Exception):
    """The model could not answer (after retries)."""


class ChatModel(Protocol):
    name: str

    async def complete(self, system: str, prompt: str, *, temperature: float, max_tokens: int = 256) -> str: ...

    async def close(self) -> None: ...


class _HttpChat:
    name = "llm"

    def __init__(
        self, base_url: str, *, timeout_s: float, max_retries: int, backoff_s: float, headers: dict[str, str],
        breaker: CircuitBreaker | None = None,
    ) -> None:
        self._client = httpx.AsyncClient(base_url=base_url.rstrip("/"), timeout=timeout_s, headers=headers)
        self._retries = max_retries
        self._backoff = backoff_s
        self._breaker = breaker or CircuitBreaker()

    async def _post(self, path: str, body: dict[str, Any], params: dict[str, str] | None = None) -> Any:
        """One call, retried on what is worth retrying; while the provider keeps failing (the breaker
        is open) calls fail at once, so every request does not pay the timeout."""
        with self._breaker.calling(lambda: LlmError(f"{self.name}: circuit open after repeated failures")):
            return await self._post_with_retries(path, body, params)

    async def _post_with_retries(self, path: str, body: dict[str, Any], params: dict[str, str] | None) -> Any:
        for attempt in range(self._retries + 1):
            try:
                resp = await self._client.post(path, json=body, params=params)
                if resp.status_code in _RETRYABLE and attempt < self._retries:
                    raise httpx.HTTPStatusError(f"retryable {resp.status_code}", request=resp.request, response=resp)
                resp.raise_for_status()
                return resp.json()
            except (httpx.TransportError, httpx.HTTPStatusError) as exc:
                status = exc.response.status_code if isinstance(exc, httpx.HTTPStatusError) else None
                if attempt == self._retries or (status is not None and status not in _RETRYABLE):
                    raise LlmError(f"{self.name}: {exc}") from exc
                log.warning("%s: %s; retrying (attempt %d)", self.name, exc, attempt + 1)
                await asyncio.sleep(self._backoff * 2**attempt)
            except ValueError as exc:
                raise LlmError(f"{self.name}: invalid JSON: {exc}") from exc
        raise AssertionError("unreachable")

    async def close(self) -> None:
        await self._client.aclose()


class OpenAICompatibleChat(_HttpChat):
    def __init__(self, base_url: str, model: str, api_key: str | None = None, **kw: Any) -> None:
        super().__init__(base_url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {}, **kw)
        self._model = model
        self.name = f"openai:{model}"

    async def complete(self, system: str, prompt: str, *, temperature: float, max_tokens: int = 256) -> str:
        data = await self._post(
            "/chat/completions",
            {
                "model": self._model,
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
                "temperature": temperature,
                "max_tokens": max_tokens,
            },
        )
        try:
            return str(data["choices"][0]["message"]["content"])
        except (KeyError, IndexError, TypeError) as exc:
            raise LlmError(f"{self.name}: unexpected response shape") from exc


class AnthropicChat(_HttpChat):
    def __init__(self, base_url: str, model: str, api_key: str | None = None, **kw: Any) -> None:
        super().__init__(base_url, headers={"x-api-key": api_key or "", "anthropic-version": "2023-06-01"}, **kw)
        self._model = model
        self.name = f"anthropic:{model}"

    async def complete(self, system: str, prompt: str, *, temperature: float, max_tokens: int = 256) -> str:
        data = await self._post(
            "/v1/messages",
            {
                "model": self._model,
                "system": system,
                "messages": [{"role": "user", "content": prompt}],
                "temperature": temperature,
                "max_tokens": max_tokens,
            },
        )
        try:
            return "".join(block["text"] for block in data["content"] if block.get("type") == "text")
        except (KeyError, TypeError) as exc:
            raise LlmError(f"{self.name}: unexpected response shape") from exc


class GeminiChat(_HttpChat):
    def __init__(self, base_url: str, model: str, api_key: str | None = None, **kw: Any) -> None:
        super().__init__(base_url, headers={"x-goog-api-key": api_key or ""}, **kw)
        self._model = model
        self.name = f"gemini:{model}"

    async def complete(self, system: str, prompt: str, *, temperature: float, max_tokens: int = 256) -> str:
        data = await self._post(
            f"/v1beta/models/{self._model}:generateContent",
            {
                "systemInstruction": {"parts": [{"text": system}]},
                "contents": [{"role": "user", "parts": [{"text": prompt}]}],
                "generationConfig": {"temperature": temperature, "maxOutputTokens": max_tokens},
            },
        )
        try:
            return "".join(p.get("text", "") for p in data["candidates"][0]["content"]["parts"])
        except (KeyError, IndexError, TypeError) as exc:
            raise LlmError(f"{self.name}: unexpected response shape") from exc


PROVIDERS = {"openai": OpenAICompatibleChat, "anthropic": AnthropicChat, "gemini": GeminiChat}
