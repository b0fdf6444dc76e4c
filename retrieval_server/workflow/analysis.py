"""Query analysis: rewrite, reformulation, HyDE and decomposition, run concurrently.

Each technique has its own timeout and all share a total one; a technique that fails, times out
or does not apply is dropped and reported, never failing the request. With an LLM configured the
techniques ask it (see :mod:`retrieval_server.backends.llm`); without one, classical methods run.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]+")
STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in into is it its
    may might more most much not of on or our out over should so some such than that the their them then there these
    they this those to too under up us was we were what when where which while who whom why will with would you your
    also about after all any because before between both each few further here just many no nor only other own same
    very via using used use""".split()
)


class NotApplicable(Exception):
    """The technique has nothing to offer for this query (reported as skipped, not as a failure)."""


class Analyzer(Protocol):
    name: str

    async def rewrite(self, query: str) -> str: ...

    async def reformulate(self, query: str, feedback: Sequence[str]) -> list[str]: ...

    async def hyde(self, query: str) -> str: ...

    async def decompose(self, query: str) -> list[str]: ...


@dataclass(slots=True)
class Analysis:
    rewritten: str | None = None
    reformulations: list[str] = field(default_factory=list)
    hyde: str | None = None
    sub_queries: list[str] = field(default_factory=list)
    #: technique -> why it contributed nothing ("skipped: ...", "timeout", "failed: ...")
    dropped: dict[str, str] = field(default_factory=dict)


def load_glossary(path: Path | None) -> dict[str, str]:
    """``abbr = expansion`` lines; blank lines and ``#`` comments ignored."""
    if path is None:
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "=" in line:
            abbr, expansion = (x.strip() for x in line.split("=", 1))
            if abbr and expansion:
                out[abbr.lower()] = expansion
    return out


class ClassicalAnalyzer:
    """No LLM: glossary rewrite, pseudo-relevance feedback, rule-based decomposition; no HyDE."""

    name = "classical"

    def __init__(self, glossary: dict[str, str] | None = None, variants: int = 3) -> None:
        self._glossary = glossary or {}
        self._variants = variants

    async def rewrite(self, query: str) -> str:
        text = " ".join(query.split())
        expanded = []
        for token in text.split(" "):
            core = token.strip(".,;:!?()\"'")
            expansion = self._glossary.get(core.lower())
            expanded.append(f"{token} ({expansion})" if expansion and expansion.lower() not in text.lower() else token)
        rewritten = " ".join(expanded)
        if rewritten == query:
            raise NotApplicable("nothing to normalize or expand")
        return rewritten

    async def reformulate(self, query: str, feedback: Sequence[str]) -> list[str]:
        """Pseudo-relevance feedback: the query plus terms that the top results share."""
        if not feedback:
            raise NotApplicable("needs the results of a first pass")
        query_terms = {w.lower() for w in _WORD.findall(query)}
        docs = [Counter(w.lower() for w in _WORD.findall(text)) for text in feedback]
        df = Counter(t for d in docs for t in d)
        scores = {
            t: sum(d[t] for d in docs) * math.log(1 + df[t])
            for t in df
            if t not in query_terms and t not in STOPWORDS and len(t) > 2 and df[t] >= min(2, len(docs))
        }
        ranked = [t for t, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))]
        if not ranked:
            raise NotApplicable("no shared terms in the feedback")
        return [f"{query} {' '.join(ranked[i : i + 2])}" for i in range(0, min(len(ranked), 2 * self._variants), 2)]

    async def hyde(self, query: str) -> str:
        raise NotApplicable("needs an LLM")

    async def decompose(self, query: str) -> list[str]:
        """Split a multi-part question: several sentences/questions, or clauses joined by 'and'."""
        parts = [p.strip(" ,") for p in re.split(r"[?;]\s*|\.\s+(?=[A-Z])", query) if p.strip(" ,.")]
        if len(parts) < 2:
            parts = [p.strip(" ,") for p in re.split(r",?\s+\b(?:and also|as well as|and|also|plus)\b\s+", query, flags=re.I)]
        parts = [p for p in parts if len(p.split()) >= 3]
        if len(parts) < 2:
            raise NotApplicable("a single question")
        return parts[:4]


async def analyze(
    analyzer: Analyzer,
    query: str,
    feedback: Sequence[str],
    *,
    timeout_s: float,
    total_timeout_s: float,
) -> Analysis:
    """Run the four techniques concurrently; collect what succeeded, report the rest."""
    result = Analysis()
    jobs: dict[str, Callable[[], Awaitable[object]]] = {
        "rewrite": lambda: analyzer.rewrite(query),
        "reformulate": lambda: analyzer.reformulate(query, feedback),
        "hyde": lambda: analyzer.hyde(query),
        "decompose": lambda: analyzer.decompose(query),
    }
    tasks = {name: asyncio.ensure_future(asyncio.wait_for(job(), timeout_s)) for name, job in jobs.items()}
    done, pending = await asyncio.wait(tasks.values(), timeout=total_timeout_s)
    for task in pending:
        task.cancel()
    for name, task in tasks.items():
        if task in pending:
            result.dropped[name] = "timeout (total)"
            continue
        exc = task.exception()
        if isinstance(exc, NotApplicable):
            result.dropped[name] = f"skipped: {exc}"
        elif isinstance(exc, asyncio.TimeoutError):
            result.dropped[name] = "timeout"
        elif exc is not None:
            log.warning("query analysis: %s failed: %s", name, exc)
            result.dropped[name] = f"failed: {type(exc).__name__}"
        else:
            value = task.result()
            if name == "rewrite":
                result.rewritten = str(value)
            elif name == "reformulate":
                result.reformulations = [str(v) for v in value][:5]  # type: ignore[union-attr]
            elif name == "hyde":
                result.hyde = str(value)
            else:
                result.sub_queries = [str(v) for v in value][:4]  # type: ignore[union-attr]
    return result
