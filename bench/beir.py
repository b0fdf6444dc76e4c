"""BEIR-format dataset folders: corpus.jsonl, queries.jsonl, qrels/<split>.tsv."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

SHARED_ENV = "RETRIEVAL_SHARED_DIR"


def shared_dir() -> Path:
    """../shared beside the checkout, or $RETRIEVAL_SHARED_DIR."""
    env = os.environ.get(SHARED_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared"


@dataclass(frozen=True, slots=True)
class BeirDataset:
    path: Path
    split: str = "test"

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def corpus(self) -> Path:
        return self.path / "corpus.jsonl"

    @property
    def qrels_file(self) -> Path:
        return self.path / "qrels" / f"{self.split}.tsv"

    def check(self) -> None:
        for f in (self.corpus, self.path / "queries.jsonl", self.qrels_file):
            if not f.is_file():
                raise FileNotFoundError(f"{self.path} is not a BEIR folder: {f.name} is missing")

    def qrels(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        with self.qrels_file.open(encoding="utf-8", newline="") as fh:
            rows = csv.reader(fh, delimiter="\t")
            header = next(rows, [])
            if header[:2] != ["query-id", "corpus-id"]:
                raise ValueError(f"{self.qrels_file}: expected a 'query-id corpus-id score' header, got {header}")
            for row in rows:
                # A blank line holds no judgement (a file may end with one).
                if not "".join(row).strip():
                    continue
                try:
                    qid, did, score = row
                    out.setdefault(qid, {})[did] = int(score)
                except ValueError:
                    raise ValueError(f"{self.qrels_file}:{rows.line_num}: expected query-id, corpus-id and an integer score, "
                                     f"separated by tabs; got {row}") from None
        return out

    def queries(self) -> dict[str, str]:
        """The split's queries (those with judgements), in file order."""
        judged = self.qrels()
        out = {}
        with (self.path / "queries.jsonl").open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    row = json.loads(line)
                    if str(row["_id"]) in judged:
                        out[str(row["_id"])] = str(row["text"])
        return out

    def corpus_batches(self, size: int, transform: Callable[[str], str] | None = None) -> Iterator[tuple[int, bytes]]:
        """(documents, jsonl bytes) chunks of the corpus, for IngestDocuments requests."""
        lines: list[str] = []
        with self.corpus.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    lines.append(transform(line) if transform else line)
                    if len(lines) == size:
                        yield len(lines), "".join(lines).encode()
                        lines = []
        if lines:
            yield len(lines), "".join(lines).encode()

    def corpus_size(self) -> int:
        with self.corpus.open(encoding="utf-8") as fh:
            return sum(1 for line in fh if line.strip())

    def corpus_sha256(self) -> str:
        h = hashlib.sha256()
        with self.corpus.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()


def open_dataset(folder: Path, split: str = "test", hint: str = "") -> BeirDataset | None:
    """The BEIR folder, or None after one line on stderr saying which of its files is missing."""
    dataset = BeirDataset(folder.resolve(), split)
    try:
        dataset.check()
    except FileNotFoundError as exc:
        print(f"{exc}{hint}", file=sys.stderr)
        return None
    return dataset
