"""A titles (or sentences) -> documents tuning split for a BEIR corpus, made from the corpus alone (no qrels).

    python -m bench.quality.titles --dataset ../shared/datasets/scifact --out DIR [--kind sentence]

Each of ``--count`` documents (chosen by a hash of the id, so stable) gives one query whose
relevant document is itself: its title, or with ``--kind sentence`` the last sentence of its
text (an abstract's conclusion, the kind of statement SciFact's claims paraphrase). Titles
saturate on SciFact (every strategy finds every document first); a sentence from the body is
a harder query, since the title field and the document's opening no longer give it away. ``DIR`` gets the corpus (linked), these queries and
``qrels/tune.tsv``; its index is the dataset's own, so ``bench.quality.tune --index-dir`` takes
the index ``bench.quality`` built for the dataset.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from retrieval_server.ingest.chunker import split_sentences


def _last_sentence(text: str) -> str:
    sentences = split_sentences(text)
    # At least three sentences, so that the query is not the document's opening too.
    return sentences[-1] if len(sentences) >= 3 and len(sentences[-1].split()) >= 8 else ""


def build(dataset: Path, out: Path, count: int, kind: str = "title") -> int:
    rows = [json.loads(line) for line in (dataset / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    query = (lambda r: str(r.get("title") or "")) if kind == "title" else (lambda r: _last_sentence(str(r.get("text") or "")))
    prefix = "t" if kind == "title" else "s"
    titled = [{"_id": r["_id"], "query": query(r)} for r in rows]
    titled = [r for r in titled if len(r["query"].split()) >= 3]
    titled.sort(key=lambda r: hashlib.sha1(str(r["_id"]).encode()).hexdigest())
    chosen = titled[:count]
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    corpus = out / "corpus.jsonl"
    if not corpus.exists():
        corpus.symlink_to((dataset / "corpus.jsonl").resolve())
    (out / "queries.jsonl").write_text("".join(json.dumps({"_id": f"{prefix}:{r['_id']}", "text": r["query"]}) + "\n" for r in chosen))
    (out / "qrels" / "tune.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{prefix}:{r['_id']}\t{r['_id']}\t1\n" for r in chosen))
    return len(chosen)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.quality.titles", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--count", type=int, default=300)
    p.add_argument("--kind", choices=["title", "sentence"], default="title", help="the query: the title, or the text's last sentence")
    args = p.parse_args(argv)
    print(f"{args.out}: {build(args.dataset, args.out, args.count, args.kind)} {args.kind} queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
