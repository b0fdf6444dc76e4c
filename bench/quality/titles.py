"""A titles -> documents tuning split for a BEIR corpus, made from the corpus alone (no qrels).

    python -m bench.quality.titles --dataset ../shared/datasets/scifact --out DIR

Each of ``--count`` documents (chosen by a hash of the id, so stable) gives one query, its
title, whose relevant document is itself. ``DIR`` gets the corpus (linked), these queries and
``qrels/tune.tsv``; its index is the dataset's own, so ``bench.quality.tune --index-dir`` takes
the index ``bench.quality`` built for the dataset.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path


def build(dataset: Path, out: Path, count: int) -> int:
    rows = [json.loads(line) for line in (dataset / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    titled = [r for r in rows if len(str(r.get("title") or "").split()) >= 3]
    titled.sort(key=lambda r: hashlib.sha1(str(r["_id"]).encode()).hexdigest())
    chosen = titled[:count]
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    corpus = out / "corpus.jsonl"
    if not corpus.exists():
        corpus.symlink_to((dataset / "corpus.jsonl").resolve())
    (out / "queries.jsonl").write_text("".join(json.dumps({"_id": f"t:{r['_id']}", "text": r["title"]}) + "\n" for r in chosen))
    (out / "qrels" / "tune.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"t:{r['_id']}\t{r['_id']}\t1\n" for r in chosen))
    return len(chosen)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.quality.titles", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--count", type=int, default=300)
    args = p.parse_args(argv)
    print(f"{args.out}: {build(args.dataset, args.out, args.count)} title queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
