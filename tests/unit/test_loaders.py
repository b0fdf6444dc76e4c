from __future__ import annotations

import base64
import json
import re
import unicodedata

import pytest

from retrieval_server.domain import DocumentSource
from retrieval_server.ingest.loaders import LoadError, load
from tests.support.pdf import make_drawing_pdf, make_pdf, make_shared_stream_form_pdf, make_shared_stream_pdf


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
    # Without an id, it names no document: ".txt" was its id.
    for name in (".txt", "notes/.MD"):
        with pytest.raises(LoadError, match=rf"needs a document_id: its file name '{re.escape(name)}' is an extension alone"):
            load(_src(name, "Hello there."))


@pytest.mark.parametrize(("name", "content"), [
    ("h.md", "# Heading Here\n\nText about lava."),
    ("h.html", "<html><head><title>Heading Here</title></head><body>Text about lava.</body></html>"),
    ("h.txt", "Text about lava."),
])
def test_a_callers_title_is_stored_on_one_line_and_a_blank_one_is_none(name: str, content: str) -> None:
    """A title of white space was stored over the file's own, and a padded one as sent."""
    own = "h" if name.endswith(".txt") else "Heading Here"
    assert load(_src(name, content, title=" \t\n ")).documents[0].title == own
    assert load(_src(name, content, title="  Padded \n Title \n")).documents[0].title == "Padded Title"


@pytest.mark.parametrize("blank", ["\u200b", "\u200b\u2060\ufeff", " \u200b\x00 "], ids=["zero-width", "format-only", "mixed"])
def test_a_callers_title_with_nothing_visible_is_none(blank: str) -> None:
    """A caller's title of zero-width or format characters alone was stored, an invisible title in
    every hit, over the file's own heading: it is none, as a file's own such title is."""
    assert load(_src("h.md", "# Heading Here\n\nText about lava.", title=blank)).documents[0].title == "Heading Here"
    assert load(_src("h.txt", "Text about lava.", title=blank)).documents[0].title == "h"


def test_a_jsonl_rows_title_is_stored_on_one_line() -> None:
    rows = json.dumps({"_id": "r1", "title": "Quarterly\n\n   report  2024", "text": "Revenue rose."}) + "\n"
    [doc] = load(_src("rows.jsonl", rows)).documents
    assert doc.title == "Quarterly report 2024" and doc.pages[0].text.startswith("Quarterly report 2024\n\n")


@pytest.mark.parametrize("blank", ["\u200b", "\u200b\u2060\ufeff", " \u200b\x00 "], ids=["zero-width", "format-only", "mixed"])
def test_a_jsonl_rows_title_with_nothing_visible_is_none(blank: str) -> None:
    """A row's title of zero-width or format characters alone was kept, an invisible title in every
    hit, and led the row's text: it is none, as a caller's such title is."""
    rows = json.dumps({"_id": "r", "title": blank, "text": "x"}) + "\n"
    [doc] = load(_src("rows.jsonl", rows)).documents
    assert (doc.title, doc.pages[0].text) == ("", "x")


def test_a_pdfs_blank_title_from_the_caller_leaves_its_own() -> None:
    pdf = make_pdf(["Text about lava."], title="Lava Fields")
    assert load(_src("f.pdf", pdf, title="   ")).documents[0].title == "Lava Fields"


def test_markdown_drops_inline_files_and_keeps_their_alt_text() -> None:
    image = base64.b64encode(bytes(range(256)) * 400).decode()
    wrapped = "\n".join(image[i : i + 76] for i in range(0, len(image), 76))  # as encoders wrap it
    text = (f"# Plan\n\n![the network diagram](data:image/png;base64,{image})\n\n[notes](data:text/plain;charset=utf-8;base64,{wrapped}) end.\n"
            "A data: URI in prose, data:text/plain;base64,SGk= stays, words after it too.")
    [doc] = load(_src("plan.md", text)).documents
    assert doc.pages[0].text == ("# Plan\n\n![the network diagram]()\n\n[notes]() end.\n"
                                 "A data: URI in prose, data:text/plain;base64,SGk= stays, words after it too.")


@pytest.mark.parametrize(("opening", "indent"), [("- ", "  "), ("- ", "\t"), ("> ", "> "), ("> > ", "  > > ")],
                         ids=["list-item", "tab", "block-quote", "nested-quote"])
def test_a_wrapped_inline_file_indented_as_its_list_item_or_quote_is_dropped(opening: str, indent: str) -> None:
    """Its lines after the first, indented to stay in the list item or quote, ended the base64
    at the first line break: the file was left in, every line of it."""
    image = base64.b64encode(bytes(range(256)) * 4).decode()
    wrapped = f"\n{indent}".join(image[i : i + 76] for i in range(0, len(image), 76))
    text = f"{opening}See ![logo](data:image/png;base64,{wrapped}) here.\n{indent}After."
    assert load(_src("l.md", text)).documents[0].pages[0].text == f"{opening}See ![logo]() here.\n{indent}After."


def test_a_markdown_inline_file_left_open_drops_no_text() -> None:
    """Its base64 was read up to the next ")" whatever came between: every paragraph up to one."""
    text = ('# Guide\n\n![logo](data:image/png;base64,iVBORw0KGgo= "Logo\n\nParagraph one about refunds.\n\n'
            "Paragraph two about shipping.\n\nSee the appendix (page 4).\n")
    assert load(_src("g.md", text)).documents[0].pages[0].text == text
    titled = "![a](data:image/png;base64,AAAA \"title (v2)\") Text after.\n![b](data:image/png;base64,AAAA 'b' )"
    assert load(_src("t.md", titled)).documents[0].pages[0].text == "![a]() Text after.\n![b]()"


def test_text_and_title_are_composed_as_queries_are() -> None:
    decomposed = unicodedata.normalize("NFD", "Sjögren and Ménière")
    assert len(decomposed) == len("Sjögren and Ménière") + 3  # ö, é, è each a letter and a mark
    [doc] = load(_src("n.md", f"# {decomposed}\n\n{decomposed} again")).documents
    assert doc.title == "Sjögren and Ménière" and doc.pages[0].text == "# Sjögren and Ménière\n\nSjögren and Ménière again"
    [row] = load(_src("c.jsonl", json.dumps({"_id": "1", "title": decomposed, "text": decomposed}))).documents
    assert row.title == "Sjögren and Ménière" and row.pages[0].text == "Sjögren and Ménière\n\nSjögren and Ménière"


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_text_files_are_read_in_the_encoding_their_byte_order_mark_says(encoding: str) -> None:
    """Notepad and PowerShell 5's redirection save UTF-16 with a byte order mark: "not UTF-8 text"."""
    def raw(text: str) -> bytes:
        return ("\ufeff" + text).encode(encoding.removesuffix("-sig")) if encoding != "utf-8-sig" else text.encode(encoding)

    [txt] = load(_src("n.txt", raw("Caf\xe9 notes."))).documents
    [md] = load(_src("n.md", raw("# Caf\xe9\n\nBody."))).documents
    [row] = load(_src("n.jsonl", raw('{"_id": "r", "text": "Caf\xe9"}'))).documents
    assert (txt.pages[0].text, md.title, row.pages[0].text) == ("Caf\xe9 notes.", "Caf\xe9", "Caf\xe9")


@pytest.mark.parametrize(
    ("html", "title", "text"),
    [
        ('<meta charset="windows-1252"><title>Caf\xe9 \u201cmenu\u201d</title><p>\u20ac5</p>'.encode("cp1252"), "Caf\xe9 \u201cmenu\u201d", "\u20ac5"),
        # Browsers read a page labelled Latin-1 or ASCII as windows-1252: 0x93 is a quotation mark, no C1 control.
        (b'<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1"><title>R\xe9sum\xe9</title><p>\x93na\xefve\x94</p>',
         "R\xe9sum\xe9", "\u201cna\xefve\u201d"),
        ('<meta charset="shift_jis"><title>\u65e5\u672c</title><p>\u8a9e</p>'.encode("shift_jis"), "\u65e5\u672c", "\u8a9e"),
        ('\ufeff<title>Hello</title><p>UTF-16 page.</p>'.encode("utf-16-le"), "Hello", "UTF-16 page."),
        # The byte order mark over the <meta>, as browsers read it.
        ('\ufeff<meta charset="windows-1252"><title>\u0141\xf3d\u017a</title>'.encode("utf-16-be"), "\u0141\xf3d\u017a", ""),
        ('<meta charset="utf-8"><title>Caf\xe9</title>'.encode(), "Caf\xe9", ""),
    ],
)
def test_html_is_read_in_the_encoding_its_byte_order_mark_or_charset_says(html: bytes, title: str, text: str) -> None:
    [doc] = load(_src("p.html", html)).documents
    assert (doc.title, doc.pages[0].text) == (title, text)


@pytest.mark.parametrize(("label", "text", "codec"), [
    # Each label's page holds characters its strict Python codec refuses (the whole page failed) or
    # reads as C1 controls (U+0080 for the euro sign): browsers read these labels as the codec given.
    ("shift_jis", "①番 髙", "cp932"),  # NEC's row 13, IBM's extensions
    ("sjis", "①番", "cp932"),
    ("gb2312", "朱镕基 喆", "gb18030"),  # GBK
    ("gbk", "€ 𠂇", "gb18030"),  # GB18030's four-byte sequences
    ("euc-kr", "똠방각하", "cp949"),  # UHC
    ("big5", "嗰啲", "big5hkscs"),  # HKSCS
    ("iso-8859-9", "İstanbul € ‰", "cp1254"),
    ("tis-620", "ราคา €", "cp874"),
    ("iso-8859-11", "ราคา …", "cp874"),
    # WHATWG's labels Python does not know: these pages were refused.
    ("windows-874", "ภาษาไทย € ราคา", "cp874"),
    ("x-sjis", "①番", "cp932"),
    ("windows-31j", "①番", "cp932"),
    ("x-gbk", "朱镕基", "gb18030"),
    ("ks_c_5601-1989", "똠방각하", "cp949"),
    ("x-cp1250", "Łódź „x”", "cp1250"),
    ("koi8-ru", "Ґанок, їжак і єнот", "koi8_u"),
    ("x-mac-cyrillic", "Ґрунт — 5 € № ґ", "mac_cyrillic"),
    ("x-mac-ukrainian", "Ґрунт — 5 € № ґ", "mac_cyrillic"),
])
def test_html_is_read_in_the_superset_browsers_read_its_charset_as(label: str, text: str, codec: str) -> None:
    [doc] = load(_src("p.html", f'<meta charset="{label}"><title>t</title><p>{text}</p>'.encode(codec))).documents
    assert doc.pages[0].text == text


@pytest.mark.parametrize("label", ["koi8-u", "koi8-ru"])
def test_html_in_koi8_u_reads_0xae_and_0xbe_as_the_standard_does(label: str) -> None:
    # WHATWG's index-koi8-u: 0xAE is U+045E "ў", 0xBE U+040E "Ў"; Python's koi8_u has "╝" and "╬".
    body = "Беларусь: ".encode("koi8_u") + b"\xaes\xa3, \xbeznagaroda"
    [doc] = load(_src("p.html", f'<meta charset="{label}"><title>t</title><p>'.encode() + body + b"</p>")).documents
    assert doc.pages[0].text == "Беларусь: ўsё, Ўznagaroda"


def test_html_of_a_windows_code_page_reads_its_unassigned_bytes_as_browsers_do() -> None:
    # 0x80-0x9F without a character are the C1 controls of their values; above, still an error.
    [doc] = load(_src("p.html", b'<meta charset="iso-8859-9"><title>t</title><p>a\x81\x80b</p>')).documents
    assert doc.pages[0].text == "a\x81\u20acb"
    with pytest.raises(LoadError, match=r"file is not tis-620 text, the charset it declares \(.* at byte 43\)"):
        load(_src("p.html", b'<meta charset="tis-620"><title>t</title><p>\xdb</p>'))


@pytest.mark.parametrize(
    ("html", "reason"),
    [
        (b"<title>Caf\xe9</title>", r"file is not UTF-8 text \(invalid continuation byte at byte 10\)$"),
        (b'<meta charset="klingon"><title>Caf\xe9</title>', r"not UTF-8 text .*, and the charset it declares, 'klingon', is none known"),
        (b'<meta charset="shift_jis"><title>\x81</title>', r"file is not shift_jis text, the charset it declares \(.* at byte 33\)"),
        # A browser looks for the <meta> in the first 1,024 bytes only; bs4's search for it is
        # quadratic in what it reads.
        (b"<!--" + b" " * 1024 + b'--><meta charset="windows-1252"><title>Caf\xe9</title>', "file is not UTF-8 text"),
    ],
)
def test_html_in_no_encoding_it_names_and_not_utf8_says_why(html: bytes, reason: str) -> None:
    with pytest.raises(LoadError, match=reason):
        load(_src("p.html", html))


def test_html_drops_scripts_and_keeps_title() -> None:
    [doc] = load(_src("p.html", "<html><head><title>T</title><script>evil()</script></head><body><p>One.</p><p>Two.</p></body></html>")).documents
    assert doc.title == "T"
    assert "evil" not in doc.pages[0].text and "One." in doc.pages[0].text and "Two." in doc.pages[0].text


@pytest.mark.parametrize("html", [
    "<html><head><title>T</title></head><body><p>First.</p></body></html>\n<p>Second.</p>",
    "<p>First.</p></body></html><p>Second.</p>",
    "<body><p>First.</p></body><body><p>Second.</p></body>",
])
def test_html_text_outside_the_first_body_is_kept(html: str) -> None:
    """libxml2 keeps text after </html> or in a second <body> beside the first body, and only that
    body was read: the rest was dropped without a word."""
    [doc] = load(_src("p.html", html)).documents
    assert doc.pages[0].text == "First.\n\nSecond."


def test_an_svg_title_is_the_text_of_its_drawing_not_the_pages_title() -> None:
    """Every <title> was dropped with the page's: a chart's accessible text, which the loader
    before indexed, was lost."""
    chart = "<svg><title>Revenue by quarter chart</title><rect/></svg>"
    [doc] = load(_src("p.html", f"<html><head><title>Report</title></head><body><p>Sales grew.</p>{chart}</body></html>")).documents
    assert (doc.title, doc.pages[0].text) == ("Report", "Sales grew.\nRevenue by quarter chart")
    [untitled] = load(_src("p.html", f"<html><body>{chart}<p>Body text.</p></body></html>")).documents
    assert (untitled.title, untitled.pages[0].text) == ("p", "Revenue by quarter chart\nBody text.")


def test_pdf_keeps_page_numbers() -> None:
    [doc] = load(_src("report.pdf", make_pdf(["First page text.", "Second page text."], title="Report"))).documents
    assert doc.title == "Report"
    assert [(p.number, p.text.strip()) for p in doc.pages] == [(1, "First page text."), (2, "Second page text.")]


def test_pdf_ligatures_are_their_letters() -> None:
    """A font that maps its glyphs to U+FB01 and U+FB03: "ﬁnancial oﬃce" was found by neither leg
    for "financial office" (NFC keeps ligatures). Only those fold: "½" stays as written."""
    title = "\\376\\377\\373\\001\\000l\\000e"  # "ﬁle" in UTF-16, as a /Title holds it, escaped
    pdf = make_pdf(["\x01nancial o\x02ce, \x03 off"], title=title, to_unicode={1: 0xFB01, 2: 0xFB03, 3: 0xBD})
    [doc] = load(_src("l.pdf", pdf)).documents
    assert (doc.title, doc.pages[0].text) == ("file", "financial office, \u00bd off")


def test_beir_jsonl() -> None:
    rows = [{"_id": "d1", "title": "T1", "text": "Body one.", "metadata": {"url": "http://x/1"}}, {"_id": "d2", "text": "Body two."}]
    docs = load(_src("corpus.jsonl", "\n".join(json.dumps(r) for r in rows))).documents
    assert [d.document_id for d in docs] == ["d1", "d2"]
    assert docs[0].url == "http://x/1" and docs[0].pages[0].text.startswith("T1")


def test_jsonl_metadata_values_are_stored_as_json_writes_them() -> None:
    """str() stored null as "None", true as "True" and a list as "['nlp', 'ir']"; a null is no value."""
    row = {"_id": "d1", "title": None, "text": "Body.", "metadata": {
        "year": 2020, "tags": ["nlp", "ir"], "peer_reviewed": True, "doi": None, "authors": [{"name": "Ana"}], "ratio": 1e-7,
        "place": "Zürich", "url": "https://x/1"}}
    [doc] = load(_src("c.jsonl", json.dumps(row))).documents
    assert (doc.title, doc.url) == ("", "https://x/1")
    assert doc.metadata == {"year": "2020", "tags": '["nlp", "ir"]', "peer_reviewed": "true", "authors": '[{"name": "Ana"}]',
                            "ratio": "1e-07", "place": "Zürich", "url": "https://x/1"}


def test_a_jsonl_title_that_is_no_string_fails_its_row() -> None:
    rows = ['{"_id": 1.0, "text": "a"}', '{"_id": "zero", "title": 0, "text": "b"}', '{"_id": "list", "title": ["A", "B"], "text": "c"}',
            '{"_id": 7, "text": "d"}']
    loaded = load(_src("c.jsonl", "\n".join(rows)))
    assert [(d.document_id, d.title) for d in loaded.documents] == [("7", "")]
    assert loaded.failed == [
        ("line 1", "'_id' must be a string or an integer (got 1.0)"),
        ("line 2", "'title' must be a string (got 0)"),
        ("line 3", "'title' must be a string (got [\"A\", \"B\"])"),
    ]


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("x.docx", b"PK", "unsupported file type '.docx'"),
        ("x.txt", b"\xff\x00bad", "not UTF-8"),
        ("x.txt", b"\xff\xfeodd", r"not UTF-16-LE text \(truncated data at byte 4\)"),  # a byte order mark says how it is read
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
        ("line 2", "invalid JSON (Expecting property name enclosed in double quotes)"),
        ("line 3", "'text' is not valid Unicode (a lone surrogate)"),
        ("line 4", "'text' must be a string"),
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
    assert loaded.failed == [("line 2", "unreadable JSON (ValueError)"), ("line 3", "unreadable JSON (RecursionError)")]


def test_long_runs_of_combining_marks_are_made_stream_safe() -> None:
    """A document's text may hold what it likes; NFC orders a run of marks by insertion, in time
    quadratic in its length (160 KB of two alternating marks took 7.7 s, holding the GIL). A
    combining grapheme joiner after every 30 marks (UAX #15) keeps it linear; shorter runs, and
    text with none, are kept as they are."""
    from retrieval_server.identifiers import COMBINING_GRAPHEME_JOINER as CGJ, MAX_COMBINING_RUN, MAX_TITLE_CHARS

    run = "\u0301\u0316" * 40_000  # classes 230 and 220: every mark out of order
    [doc] = load(_src("marks.txt", "a" + run + " end")).documents
    text = doc.pages[0].text
    assert text.count(CGJ) == len(run) // MAX_COMBINING_RUN and text.replace(CGJ, "") != run
    assert all(len(piece) <= MAX_COMBINING_RUN for piece in text[1:-4].split(CGJ))
    assert unicodedata.is_normalized("NFC", text)
    within = "e" + "\u0301" * MAX_COMBINING_RUN + " Zürich 漢字"
    assert load(_src("ok.txt", within)).documents[0].pages[0].text == unicodedata.normalize("NFC", within)
    # Marks that decompose into two (Tibetan vowel signs, U+0344) count as two: a text and its NFC
    # count alike, so normalizing never makes a run longer (a found title grew past its limit).
    assert load(_src("t.txt", "\u0f40" + "\u0f73" * 16)).documents[0].pages[0].text.count(CGJ) == 1
    from retrieval_server.identifiers import stream_safe

    for raw in ("a" + "\u0344" * 16, ("a" + "\u0344" * 30) * 3, "\u0f40" + "\u0f73\u0301" * 20):
        safe = unicodedata.normalize("NFC", stream_safe(raw))
        assert CGJ in safe and stream_safe(safe) == safe
    [titled] = load(_src("g.md", "# " + ("a" + "\u0344" * 30) * 40 + "\nbody")).documents
    assert len(titled.title) <= MAX_TITLE_CHARS


def test_markdown_patterns_read_hostile_lines_in_one_pass() -> None:
    """A heading of many spaces (cubic: 2 KB took 12.5 s, 1 KB 1.4 s) and many "](data:" that
    never close (quadratic: 112 KB took a minute) are read in one pass; the heading's closing
    hashes go."""
    [doc] = load(_src("h.md", "# a" + " " * 1_000 + "x\n\n" + "](data:" * 50_000)).documents
    assert doc.title == "a x"
    assert load(_src("t.md", "#   Release notes ##  \nbody")).documents[0].title == "Release notes"
    assert load(_src("n.md", "#\n\nNot a heading")).documents[0].title == "n"
    # CommonMark: closing hashes only after a space; a heading of hashes alone is empty.
    assert load(_src("c.md", "# Learning C#\nbody")).documents[0].title == "Learning C#"
    assert load(_src("e.md", "# ##\nbody")).documents[0].title == "e"
    assert load(_src("e.md", "# ##\nbody\n# Guide")).documents[0].title == "Guide"  # an empty heading names nothing


def test_a_title_the_file_gives_is_cut_once_normalized() -> None:
    """U+0958 is two code points in NFC: a found title cut before normalizing grew past the limit
    and refused the document. A PDF /Title that is not a string is no title."""
    from retrieval_server.identifiers import MAX_TITLE_CHARS

    [doc] = load(_src("h.html", f"<html><head><title>{chr(0x958) * MAX_TITLE_CHARS}</title></head><body>x</body></html>")).documents
    assert len(doc.title) == MAX_TITLE_CHARS and unicodedata.is_normalized("NFC", doc.title)
    pdf = make_pdf(["Glaciers carve valleys over thousands of years."], title="x")
    for title in (b"5", b"[1]"):
        [doc] = load(_src("glaciers.pdf", pdf.replace(b"/Title (x)", b"/Title " + title))).documents
        assert doc.title == "glaciers" and doc.pages[0].text.startswith("Glaciers carve")


@pytest.mark.parametrize(("name", "content"), [
    ("report.pdf", make_pdf(["Some text."], title="   ")),
    ("report.pdf", make_pdf(["Some text."], title="\\000")),  # a NUL, escaped in the PDF string
    ("report.pdf", make_pdf(["Some text."], title="\\376\\377")),  # UTF-16's byte order mark alone
    ("report.html", "<title> \u200b\n </title><p>Some text.</p>"),
    ("report.md", "# \u200b\u200b\n\nSome text."),
], ids=["pdf-spaces", "pdf-nul", "pdf-bom", "html-zero-width", "md-zero-width"])
def test_a_title_with_nothing_to_read_is_the_file_name(name: str, content: bytes | str) -> None:
    """A title of white space, format or control characters alone replaced the file name."""
    assert load(_src(name, content)).documents[0].title == "report"


def test_a_title_the_file_gives_is_on_one_line() -> None:
    """A PDF's padding and an HTML <title>'s line breaks were kept in every result citing it."""
    pdf = make_pdf(["Some text."], title="  Padded   Title \\n")
    assert load(_src("p.pdf", pdf)).documents[0].title == "Padded Title"
    assert load(_src("h.html", "<title>\n  Multi\n  line\n</title><p>b</p>")).documents[0].title == "Multi line"


def test_jsonl_rows_end_at_line_feeds_only() -> None:
    """JSON holds U+2028, U+2029 and U+0085 unescaped in strings: splitlines() cut such a row in
    two, lost it and shifted every later line number."""
    rows = [{"_id": "a", "text": "first\u2028second\u2029third\u0085fourth"}, {"_id": "b", "text": "plain"}]
    loaded = load(_src("c.jsonl", "\r\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n{bad\n"))
    assert [(d.document_id, d.pages[0].text) for d in loaded.documents] == [("a", rows[0]["text"]), ("b", "plain")]
    assert [where for where, _ in loaded.failed] == ["line 3"]
    # Old Mac line ends: a raw CR cannot be inside a JSON string either.
    assert [d.document_id for d in load(_src("m.jsonl", "\r".join(json.dumps(r) for r in rows))).documents] == ["a", "b"]


def test_a_pdf_with_more_text_than_a_text_file_may_hold_is_refused_by_the_page_that_passes_it() -> None:
    """A PDF's pages may share one content stream, read again for each: 12 KB made 6 million
    characters in a minute, and a 1 MB file would have held the ingest thread for hours."""
    pdf = make_pdf(["word " * 2000] * 6)
    with pytest.raises(LoadError, match="over 25000 characters by page 3"):
        load(_src("pages.pdf", pdf), max_document_bytes=25_000)
    assert len(load(_src("pages.pdf", pdf), max_document_bytes=60_000).documents[0].pages) == 6


@pytest.mark.parametrize("opened", ["<a", "<?x", "</a", "<!--x"])
def test_html_with_constructs_left_open_is_read_in_one_pass(opened: str) -> None:
    """html.parser rescanned the rest of the file for each one: 200,000 "<a" (400 KB, far under
    every limit) took 44 s of an ingest thread, and twice that many four times as long."""
    [doc] = load(_src("open.html", "<p>Before.</p>" + opened * 200_000)).documents
    assert doc.pages[0].text.startswith("Before.")


def test_html_comments_are_no_text_however_long() -> None:
    """libxml2 keeps a comment of over 10,000,000 characters as text."""
    draft = "<!-- " + "old draft " * 1_050_000 + "-->"
    [doc] = load(_src("c.html", f"<html><body>{draft}<p>Visible text.</p><!-- left open <p>hidden</p></body></html>"), 10**8).documents
    assert doc.pages[0].text == "Visible text."


@pytest.mark.parametrize("html", [
    "<p>Intro.</p><script>if (s.startsWith('<!--')) skip();</script><p>Refund policy: 30 days.</p>",
    "<p>Intro. <a title='<!--'>link</a></p><p>Refund policy: 30 days.</p>",
    "<p>Intro.</p><textarea><!-- example</textarea><p>Refund policy: 30 days.</p>",
    "<p>Intro.</p><!--><p>Refund policy: 30 days.</p>",
    "<p>Intro.</p><!---><p>Refund policy: 30 days.</p>",
    "<p>Intro.</p><!-- note --!><p>Refund policy: 30 days.</p>",
])
def test_html_comments_are_where_html_reads_them_not_wherever_a_comment_opener_is_written(html: str) -> None:
    """A search for "<!--" took one in a script, an attribute or a textarea for a comment, and
    missed the ones HTML closes early: the rest of the page was dropped without a word."""
    [doc] = load(_src("p.html", html)).documents
    assert doc.pages[0].text.startswith("Intro.") and doc.pages[0].text.endswith("Refund policy: 30 days.")


def test_html_inline_tags_keep_their_words_whole_and_blocks_end_lines() -> None:
    html = ("<p>Water is H<sub>2</sub>O. The <b>un</b>believable results came from <a href=x>re</a>ranking.</p>"
            "<ul><li>one</li><li>two</li></ul>line<br>break<table><tr><td>a</td><td>b</td></tr></table>")
    [doc] = load(_src("p.html", html)).documents
    lines = doc.pages[0].text.split("\n")
    assert "Water is H2O. The unbelievable results came from reranking." in lines
    assert {"one", "two", "line", "break", "a", "b"} <= set(lines)


def test_html_with_more_tags_than_a_page_has_is_refused_before_it_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """BeautifulSoup holds about 600 bytes a tag: 16 MiB of "<b>" took 3.4 GB."""
    from retrieval_server.ingest import loaders

    monkeypatch.setattr(loaders, "MAX_HTML_TAGS", 100)
    with pytest.raises(LoadError, match="more than 100 tags"):
        load(_src("tags.html", "<b>" * 101))
    assert "text" in load(_src("ok.html", "<p>text</p>" * 50)).documents[0].pages[0].text


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_a_markdown_heading_ends_at_any_line_end(newline: str) -> None:
    """A file of CR line ends (old Mac) had its whole text for its title."""
    text = newline.join(["Intro line.", "# Title ##", "Body text line two.", "Third line."])
    assert load(_src("notes.md", text)).documents[0].title == "Title"


def test_a_pdf_holds_at_most_a_few_characters_a_byte_of_its_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the largest document allowed: a 13 KB file whose 2,000 pages share one content
    stream held the ingest thread 33 s before the 16 Mi characters were reached."""
    from retrieval_server.ingest import loaders

    pdf = make_shared_stream_pdf(pages=20, words=2000)
    monkeypatch.setattr(loaders, "PDF_MIN_TEXT_CHARS", 0)
    with pytest.raises(LoadError, match=r"by page \d+, more than 16 a byte of the file") as refused:
        load(_src("shared.pdf", pdf), max_document_bytes=10**9)
    page = int(re.search(r"by page (\d+)", str(refused.value)).group(1))  # type: ignore[union-attr]
    assert 1 < page < 20 and 16 * len(pdf) < page * 10_000
    monkeypatch.setattr(loaders, "PDF_MIN_TEXT_CHARS", 10**6)
    assert len(load(_src("shared.pdf", pdf)).documents[0].pages) == 20  # a small file may hold up to the floor



def _counting_extractions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each page pypdf reads the text of, by its number."""
    from pypdf import PageObject

    extract = PageObject.extract_text
    read: list[int] = []

    def counted(page: PageObject, *args: object, **kwargs: object) -> str:
        read.append(page.page_number + 1)  # type: ignore[operator]
        return extract(page, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(PageObject, "extract_text", counted)
    return read


def test_pages_that_share_a_content_stream_are_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """pypdf parsed the stream again for each page: a 4.7 KB file of 100,000 drawing operators
    and one word, shown by 10 pages, held the ingest thread 32 s."""
    read = _counting_extractions(monkeypatch)
    pdf = make_shared_stream_pdf(pages=20, words=50)
    [doc] = load(_src("shared.pdf", pdf)).documents
    assert read == [1]
    assert [p.number for p in doc.pages] == list(range(1, 21)) and len({p.text for p in doc.pages}) == 1
    assert doc.pages[-1].text.count("word") == 50


@pytest.mark.parametrize("indirect_resources", [False, True], ids=["inline-resources", "resources-object"])
def test_pages_that_share_a_content_stream_under_their_own_resources_each_have_their_own_text(
    monkeypatch: pytest.MonkeyPatch, indirect_resources: bool,
) -> None:
    """One stream, "q /Fm0 Do Q", each page's /Fm0 its own form: every page had page 1's text."""
    read = _counting_extractions(monkeypatch)
    texts = ["alpha introduction page", "beta methods page", "gamma results page"]
    [doc] = load(_src("forms.pdf", make_shared_stream_form_pdf(texts, indirect_resources))).documents
    assert [p.text for p in doc.pages] == texts and read == [1, 2, 3]


def test_a_pdf_whose_content_streams_decode_past_the_budget_is_refused_before_they_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pages of text-less drawing, each its own stream, pass any limit on the text: parsing them
    is the work to bound."""
    from retrieval_server.ingest import loaders

    pdf = make_drawing_pdf(pages=10, operators=2000)  # 28 KB a page decoded, about 100 bytes in the file
    assert [p.text for p in load(_src("d.pdf", pdf)).documents[0].pages] == [f"page{n}" for n in range(1, 11)]
    read = _counting_extractions(monkeypatch)
    monkeypatch.setattr(loaders, "PDF_MIN_CONTENT_BYTES", 0)
    with pytest.raises(LoadError, match=r"content streams are over \d+ bytes decoded by page \d+, more than 16 bytes a byte of the file") as refused:
        load(_src("d.pdf", pdf))
    page = int(re.search(r"by page (\d+)", str(refused.value)).group(1))  # type: ignore[union-attr]
    assert 1 < page < 10 and read == list(range(1, page))
    with pytest.raises(LoadError, match=r"over 40000 bytes decoded by page 2, more than 4 times the largest document \(RETRIEVAL_MAX_DOCUMENT_BYTES\)"):
        load(_src("d.pdf", pdf), max_document_bytes=10_000)

def test_a_markdown_title_is_no_comment_in_code_or_front_matter() -> None:
    code = "Intro.\n\n```bash\n# install the toolchain first\nmake\n```\n\n# Build server guide\n\nText."
    assert load(_src("b.md", code)).documents[0].title == "Build server guide"
    tilde = "~~~~\n# not this\n~~~\n# nor this\n~~~~\n# Guide"  # a shorter fence closes nothing
    assert load(_src("t.md", tilde)).documents[0].title == "Guide"
    front = "---\ntitle: x\n# internal: yes\n---\n# Handbook\nbody"
    assert load(_src("f.md", front)).documents[0].title == "Handbook"


@pytest.mark.parametrize("text", [
    "Intro.\n\n   # Handbook\n\nText.",  # indented by up to 3 spaces (CommonMark)
    "    # not this, code\n\t# nor this\n# Handbook",
    "---\n\n# Handbook\n\nText.\n\n---\n\nMore.",  # a thematic break: "---" before a blank line
    "---\nno closing line\n# Handbook\nText.",  # front matter that never closes is none
], ids=["indented", "code", "thematic-break", "unclosed"])
def test_a_markdown_title_is_found_where_commonmark_puts_a_heading(text: str) -> None:
    """An indented heading was missed, and a leading "---" that never closed, or was a thematic
    break, was taken for front matter hiding every heading: the title was the file's name."""
    assert load(_src("f.md", text)).documents[0].title == "Handbook"


#: a title holding BEL, ESC [31m (red), an OSC 52 sequence (which writes the clipboard) and CSI (C1)
_ESCAPING = "Ti\x07tle\x1b[31m \x1b]52;c;aGk=\x07\x9bend"


@pytest.mark.parametrize(("name", "content"), [
    ("t.html", f"<title>{_ESCAPING}</title><p>Body text.</p>"),
    ("t.md", f"# {_ESCAPING}\n\nBody text."),
    # UTF-16 in the PDF string, by octal escapes: PDFDocEncoding has glyphs where ASCII has controls
    ("t.pdf", make_pdf(["Body text."], title="\\376\\377" + "".join(f"\\{b:03o}" for b in _ESCAPING.encode("utf-16-be")))),
    ("t.jsonl", json.dumps({"_id": "t", "title": _ESCAPING, "text": "Body text."})),
], ids=["html", "md", "pdf", "jsonl"])
def test_a_title_from_the_file_has_spaces_for_its_control_characters(name: str, content: str | bytes) -> None:
    """Stored as written, they came back in every hit, for a terminal to obey."""
    [doc] = load(_src(name, content)).documents
    assert doc.title == "Ti tle [31m ]52;c;aGk= end"


@pytest.mark.parametrize("name", [f"{_ESCAPING}.txt", f"{_ESCAPING}.md", f"{_ESCAPING}.html", f"{_ESCAPING}\r\n.txt"])
def test_a_title_from_the_file_name_has_spaces_for_its_control_characters_on_one_line(name: str) -> None:
    """The file name is the title of a file that gives none, and was stored with its escapes and
    line breaks: "invoice\\x1b]52;c;...\\x07\\x1b[2K\\rpaid.txt" wrote every reader's clipboard."""
    [doc] = load(_src(name, "Body text.", document_id="d")).documents
    assert doc.title == "Ti tle [31m ]52;c;aGk= end"


def test_a_jsonl_rows_metadata_has_spaces_for_its_control_characters() -> None:
    """Its title's were cleaned, its url and metadata (carried back in every context) kept them;
    then its values were, and its keys kept them (a caller's were cleaned over gRPC)."""
    row = {"_id": "t", "text": "Body text.", "metadata": {"team": _ESCAPING, "url": f"https://e.example/{_ESCAPING}", "year": 2020,
                                                          _ESCAPING: "key"}}
    [doc] = load(_src("t.jsonl", json.dumps(row))).documents
    assert doc.metadata == {"team": "Ti tle [31m  ]52;c;aGk=  end", "url": "https://e.example/Ti tle [31m  ]52;c;aGk=  end",
                            "year": "2020", "Ti tle [31m  ]52;c;aGk=  end": "key"}
    assert doc.url == doc.metadata["url"]


def test_a_jsonl_rows_metadata_keys_that_are_one_once_cleaned_are_that_rows_error() -> None:
    """One value of the two would have been dropped without a word; the other rows are stored."""
    rows = [{"_id": "a", "text": "Body.", "metadata": {"team\x1b": "a", "team ": "b"}}, {"_id": "b", "text": "Body."}]
    loaded = load(_src("t.jsonl", "\n".join(json.dumps(r) for r in rows)))
    assert [d.document_id for d in loaded.documents] == ["b"]
    assert loaded.failed == [("line 1", "metadata keys ['team\\x1b'] are other keys once their control characters are spaces: send each key once")]


def test_markdown_files_inline_in_any_form_are_no_text() -> None:
    """A reference definition's target or an HTML image's source as an inline file: a 300 KB
    image made 1,837 children of base64."""
    blob = "iVBORw0KGgo" * 30_000
    for text in (f"Logo below.\n\n![logo][l]\n\n[l]: data:image/png;base64,{blob}\n\nAfter.",
                 f"Logo below.\n\n   [l]: <data:image/png;base64,{blob}>\nAfter.",
                 f'Logo below. <img alt="logo" src="data:image/png;base64,{blob}"> After.',
                 f"Logo below. <img src=data:image/png;base64,{blob}> After."):
        page = load(_src("m.md", text)).documents[0].pages[0].text
        assert blob[:40] not in page and page.startswith("Logo below.") and page.rstrip().endswith("After."), text[:40]


def test_metadata_keys_that_are_one_once_their_control_characters_are_spaces_are_refused() -> None:
    """One value of the two would have been dropped without a word."""
    from retrieval_server.ingest.loaders import metadata_without_controls

    assert metadata_without_controls({"team\x1b": "a\x07b"}) == {"team ": "a b"}
    with pytest.raises(ValueError, match=r"metadata keys \['team\\x1b'\] are other keys once their control characters are spaces"):
        metadata_without_controls({"team\x1b": "a", "team ": "b"})
