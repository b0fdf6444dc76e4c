from __future__ import annotations

import base64
import json
import unicodedata

import pytest

from retrieval_server.domain import DocumentSource
from retrieval_server.ingest.loaders import LoadError, load
from tests.support.pdf import make_pdf


def _src(name: str, content: bytes | str, **kw: object) -> DocumentSource:
    return DocumentSource(filename=name, content=content.encode() if isinstance(content, str) else content, **kw)  # type: ignore[arg-type]


def test_text_and_markdown() -> None:
    [doc] = load(_src("notes.txt", "Hello there.")).documents
    assert (doc.document_id, doc.title, doc.pages[0].text) == ("notes", "notes", "Hello there.")
    [md] = load(_src("guide.md", "intro\n# The Guide\nbody")).documents
    assert md.title == "The Guide"


def test_a_name_that_is_only_an_extension_names_its_type() -> None:
    """IngestDocuments names a document sent without a filename "<document_id>.txt": for an id ending
    in "/" that is "notes/.txt", whose last part Python reads as a dot file without a suffix."""
    [doc] = load(_src("notes/.txt", "Hello there.", document_id="notes/")).documents
    assert (doc.document_id, doc.pages[0].text) == ("notes/", "Hello there.")
    [md] = load(_src(".md", "intro\n# The Guide\nbody", document_id="guide")).documents
    assert md.title == "The Guide"
    with pytest.raises(LoadError, match=r"unsupported file type '\(none\)'"):
        load(_src(".profile", "export X=1"))


def test_markdown_drops_inline_files_and_keeps_their_alt_text() -> None:
    image = base64.b64encode(bytes(range(256)) * 400).decode()
    wrapped = "\n".join(image[i : i + 76] for i in range(0, len(image), 76))  # as encoders wrap it
    text = (f"# Plan\n\n![the network diagram](data:image/png;base64,{image})\n\n[notes](data:text/plain;charset=utf-8;base64,{wrapped}) end.\n"
            "A data: URI in prose, data:text/plain;base64,SGk= stays, words after it too.")
    [doc] = load(_src("plan.md", text)).documents
    assert doc.pages[0].text == ("# Plan\n\n![the network diagram]()\n\n[notes]() end.\n"
                                 "A data: URI in prose, data:text/plain;base64,SGk= stays, words after it too.")


def test_text_and_title_are_composed_as_queries_are() -> None:
    decomposed = unicodedata.normalize("NFD", "Sjögren and Ménière")
    assert len(decomposed) == len("Sjögren and Ménière") + 3  # ö, é, è each a letter and a mark
    [doc] = load(_src("n.md", f"# {decomposed}\n\n{decomposed} again")).documents
    assert doc.title == "Sjögren and Ménière" and doc.pages[0].text == "# Sjögren and Ménière\n\nSjögren and Ménière again"
    [row] = load(_src("c.jsonl", json.dumps({"_id": "1", "title": decomposed, "text": decomposed}))).documents
    assert row.title == "Sjögren and Ménière" and row.pages[0].text == "Sjögren and Ménière\n\nSjögren and Ménière"


def test_html_drops_scripts_and_keeps_title() -> None:
    [doc] = load(_src("p.html", "<html><head><title>T</title><script>evil()</script></head><body><p>One.</p><p>Two.</p></body></html>")).documents
    assert doc.title == "T"
    assert "evil" not in doc.pages[0].text and "One." in doc.pages[0].text and "Two." in doc.pages[0].text


def test_pdf_keeps_page_numbers() -> None:
    [doc] = load(_src("report.pdf", make_pdf(["First page text.", "Second page text."], title="Report"))).documents
    assert doc.title == "Report"
    assert [(p.number, p.text.strip()) for p in doc.pages] == [(1, "First page text."), (2, "Second page text.")]


def test_beir_jsonl() -> None:
    rows = [{"_id": "d1", "title": "T1", "text": "Body one.", "metadata": {"url": "http://x/1"}}, {"_id": "d2", "text": "Body two."}]
    docs = load(_src("corpus.jsonl", "\n".join(json.dumps(r) for r in rows))).documents
    assert [d.document_id for d in docs] == ["d1", "d2"]
    assert docs[0].url == "http://x/1" and docs[0].pages[0].text.startswith("T1")


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("x.docx", b"PK", "unsupported file type '.docx'"),
        ("x.txt", b"\xff\xfe\x00bad", "not UTF-8"),
        ("x.pdf", b"%PDF-1.4 garbage", "PDF"),
        ("x.jsonl", '{broken\n{"title": "no id"}', r"line 1: invalid JSON .* \(and 1 more rows\)"),
        ("x.jsonl", '{"title": "no id"}', "line 1: a BEIR row needs '_id' and 'text'"),
        # JSON may escape a lone UTF-16 surrogate, which is no Unicode text: the tokenizer, SQLite and
        # the fingerprint's encoding all refuse it, and the whole request used to fail with it.
        ("x.jsonl", '{"_id": "b", "text": "broken \\ud800 text"}', "line 1: 'text' is not valid Unicode"),
        ("x.jsonl", '{"_id": "\\udfff", "text": "ok"}', "line 1: '_id' is not valid Unicode"),
        ("x.jsonl", '{"_id": "a", "title": "\\ud83d", "text": "ok"}', "line 1: 'title' is not valid Unicode"),
        ("x.jsonl", '{"_id": "a", "text": "ok", "metadata": {"k": "\\ud800"}}', "line 1: 'metadata' is not valid Unicode"),
    ],
)
def test_broken_files_say_why(name: str, content: bytes | str, reason: str) -> None:
    with pytest.raises(LoadError, match=reason):
        load(_src(name, content))


def test_a_jsonl_row_that_cannot_be_read_fails_alone() -> None:
    rows = ['{"_id": "a", "text": "ok"}', "{broken", '{"_id": "b", "text": "broken \\ud800 text"}', '{"_id": "c", "text": 5}', '{"_id": "d", "text": "fine"}']
    loaded = load(_src("x.jsonl", "\n".join(rows)))
    assert [d.document_id for d in loaded.documents] == ["a", "d"]
    assert loaded.failed == [
        ("line 2", "line 2: invalid JSON (Expecting property name enclosed in double quotes)"),
        ("line 3", "line 3: 'text' is not valid Unicode (a lone surrogate)"),
        ("line 4", "line 4: 'text' must be a string"),
    ]


def test_a_file_of_many_bad_rows_reports_the_first_hundred_and_counts_the_rest() -> None:
    loaded = load(_src("x.jsonl", "\n".join(['{"_id": "a", "text": "ok"}', *["{broken"] * 150])))
    assert [d.document_id for d in loaded.documents] == ["a"] and len(loaded.failed) == 101
    assert loaded.failed[99][0] == "line 101" and loaded.failed[100] == ("line 102+", "50 more rows could not be read")


def test_json_python_cannot_hold_fails_its_row() -> None:
    """An integer over Python's 4,300 digits, nesting past its stack: that row's error, not the file's."""
    rows = ['{"_id": "a", "text": "ok"}', '{"_id": ' + "9" * 5_000 + ', "text": "t"}', "[" * 100_000, '{"_id": "d", "text": "fine"}']
    loaded = load(_src("x.jsonl", "\n".join(rows)))
    assert [d.document_id for d in loaded.documents] == ["a", "d"]
    assert loaded.failed == [("line 2", "line 2: unreadable JSON (ValueError)"), ("line 3", "line 3: unreadable JSON (RecursionError)")]
