"""A small corpus the demo writes to disk: public documents and private ones owned by alice and bob."""

from __future__ import annotations

from pathlib import Path

PUBLIC: dict[str, str] = {
    "small-to-big.md": """# Small-to-big retrieval

Small-to-big retrieval searches small chunks and returns the larger sections that contain them.
Child chunks of about one hundred tokens are embedded, because a short passage has a focused
meaning and matches a question precisely. Parent chunks of a few hundred tokens are returned to
the caller, because a language model needs surrounding context to answer well.

When several children of one parent match, the parent is returned once, ranked by its best child.
The children that matched travel with the parent as evidence, so a caller can highlight them.
""",
    "rank-fusion.txt": """Reciprocal Rank Fusion combines ranked lists from different retrievers.
Each document receives the sum of one over k plus its rank in every list where it appears.
The constant k is usually sixty, as in the original paper by Cormack, Clarke and Buettcher.
Fusion needs no score calibration, which is why it works well for hybrid search that mixes
dense vector similarity with BM25 keyword scores.
""",
    "semantic-cache.html": """<html><head><title>Semantic cache</title></head><body>
<h1>Semantic cache</h1>
<p>A semantic cache answers a repeated question without running retrieval again.
The query embedding is compared with the embeddings of earlier queries.</p>
<p>When the cosine similarity is above 0.95 the cached answer is returned.
Entries expire after one hour, and entries built from private documents are kept per user.</p>
</body></html>
""",
    "travel-policy.txt": """Company travel policy.
Employees book economy class for flights shorter than six hours.
Hotel costs are reimbursed up to the city limit published by the finance team.
Receipts must be submitted within thirty days of the end of the trip.
""",
}

# Private documents, by owner.
PRIVATE: dict[str, dict[str, str]] = {
    "alice": {
        "alice-salary-review.txt": """Salary review for Alice, confidential.
Alice's performance rating this year is exceeds expectations.
Her salary increases by six percent from the first of April, and her travel budget doubles.
""",
    },
    "bob": {
        "bob-project-notes.md": """# Project Falcon notes

Bob's private notes: the Falcon migration moves the billing database to the new cluster in May.
The rollback plan keeps the old cluster read-only for two weeks.
""",
    },
}


def write_sample_corpus(root: Path) -> list[Path]:
    """Write the corpus under ``root/public`` and ``root/private/<owner>``; return the files."""
    written = []
    for name, text in PUBLIC.items():
        path = root / "public" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    for owner, files in PRIVATE.items():
        for name, text in files.items():
            path = root / "private" / owner / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written
