"""A long-query retrieval set in BEIR format, built offline from Python's documentation.

    apt-get install python3.11-doc
    python -m bench.quality.longset --out bench/results/datasets/pydoc-long
    python -m bench.quality --dataset bench/results/datasets/pydoc-long

Like ArguAna ("find the counter-argument to this text"), a query is a long passage and the
relevant document is a different text on the same subject: every documentation section with
enough prose is cut in two at a paragraph boundary; the first half is the query, the second
half (with the section title) the document. Sections too short to cut join the corpus as
distractors. Nothing here comes from SciFact or NFCorpus, so no parameter of the service was
chosen on it: it is a set the project does not see.

Splits (by a hash of the section id, so they are stable and disjoint):
- ``qrels/test.tsv``: half of the long queries, for reporting;
- ``qrels/tune.tsv``: the other half, plus the section titles of the same sections as short
  queries ("titles -> documents"): the tuning set, on which ADAPTIVE's thresholds were chosen.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SOURCE = Path("/usr/share/doc/python3.11-doc/html/_sources")
#: the parts of the documentation that are prose (the C API and release notes are mostly lists)
FOLDERS = ("library", "howto", "tutorial", "reference", "faq", "using")
_UNDERLINE = re.compile(r"^([=\-~^*+#\"'])\1{2,}\s*$")
_ROLE = re.compile(r":[\w:.-]+:`~?!?([^`<]*?)(?:\s*<[^>]*>)?`")
_LITERAL = re.compile(r"``([^`]*)``|`([^`<]*?)(?:\s*<[^>]*>)?`_*")
_EMPHASIS = re.compile(r"\*\*?([^*]+)\*\*?")


@dataclass(frozen=True, slots=True)
class Section:
    id: str
    title: str
    paragraphs: tuple[str, ...]


def _clean(text: str) -> str:
    text = _ROLE.sub(r"\1", text)
    text = _LITERAL.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)
    text = _EMPHASIS.sub(r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def _paragraphs(lines: list[str]) -> list[str]:
    """Prose paragraphs: unindented blocks that are not directives, comments, tables or doctests."""
    out, block = [], []
    for line in [*lines, ""]:
        if line.strip() and not line[0].isspace():
            block.append(line)
            continue
        if block and not block[0].startswith(("..", ":", ">>>", "|", "+", "=", "*", "-", "#")):
            para = _clean(" ".join(block))
            if len(para.split()) >= 8:
                out.append(para)
        block = []
    return out


def sections(path: Path, doc_id: str) -> Iterator[Section]:
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    heads = [i for i in range(1, len(lines)) if _UNDERLINE.match(lines[i]) and lines[i - 1].strip()
             and len(lines[i].strip()) >= len(lines[i - 1].strip())]
    for n, h in enumerate(heads):
        end = heads[n + 1] - 1 if n + 1 < len(heads) else len(lines)
        title = _clean(lines[h - 1].strip())
        paras = _paragraphs(lines[h + 1 : end])
        if title and paras:
            yield Section(f"{doc_id}#{n}", title, tuple(paras))


def _bucket(section_id: str) -> int:
    return hashlib.sha1(section_id.encode()).digest()[0] % 2


def build(source: Path, out: Path, min_query_words: int = 100, min_doc_words: int = 40, max_queries: int = 600) -> dict[str, int]:
    corpus: list[dict[str, str]] = []
    queries: list[dict[str, str]] = []
    qrels: dict[str, list[tuple[str, str]]] = {"test": [], "tune": []}
    files = sorted(p for folder in FOLDERS for p in (source / folder).glob("*.rst.txt"))
    for f in files:
        for s in sections(f, f"{f.parent.name}/{f.name.removesuffix('.rst.txt')}"):
            # Cut at the paragraph boundary nearest to half of the words.
            words = [len(p.split()) for p in s.paragraphs]
            total, cut, acc = sum(words), 0, 0
            while cut < len(words) - 1 and acc + words[cut] / 2 < total / 2:
                acc += words[cut]
                cut += 1
            rest = total - acc
            if acc >= min_query_words and rest >= min_doc_words:
                corpus.append({"_id": s.id, "title": s.title, "text": "\n\n".join(s.paragraphs[cut:])})
                split = "test" if _bucket(s.id) == 0 else "tune"
                if len(qrels[split]) < max_queries:
                    queries.append({"_id": f"q:{s.id}", "text": "\n\n".join(s.paragraphs[:cut])})
                    qrels[split].append((f"q:{s.id}", s.id))
                    if split == "tune":
                        queries.append({"_id": f"t:{s.id}", "text": s.title})
                        qrels["tune"].append((f"t:{s.id}", s.id))
            elif sum(words) >= min_doc_words:
                corpus.append({"_id": s.id, "title": s.title, "text": "\n\n".join(s.paragraphs)})
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(row) + "\n" for row in corpus)
    (out / "README.md").write_text("Built by `python -m bench.quality.longset` from the Python 3.11 documentation (PSF license).\n")
    with (out / "queries.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(row) + "\n" for row in queries)
    for split, rows in qrels.items():
        (out / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in rows))
    return {"documents": len(corpus), "test": len(qrels["test"]), "tune": len(qrels["tune"])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.quality.longset", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the reST sources of the Python documentation")
    p.add_argument("--out", type=Path, required=True, help="BEIR folder to write")
    p.add_argument("--max-queries", type=int, default=600, help="long queries per split")
    args = p.parse_args(argv)
    if not (args.source / "library").is_dir():
        print(f"{args.source} has no library/ folder: install python3.11-doc (apt) or pass --source", file=sys.stderr)
        return 2
    counts = build(args.source, args.out, max_queries=args.max_queries)
    print(f"{args.out}: {counts['documents']} documents, {counts['test']} test queries, {counts['tune']} tuning queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
