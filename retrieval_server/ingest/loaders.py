"""File loaders: .txt, .md, .html, .pdf and BEIR-style .jsonl (``_id``, ``title``, ``text``)."""

from __future__ import annotations

import codecs
import dataclasses
import io
import json
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from retrieval_server.domain import DocumentSource
from retrieval_server.identifiers import MAX_TITLE_CHARS, composed, composed_metadata, has_visible_text, metadata_each, one_line
from retrieval_server.ingest.markdown import headings


class LoadError(Exception):
    """A file that can't be read; the message says why."""


@dataclass(frozen=True, slots=True)
class Page:
    number: int  # 1-based for paged formats, 0 when the format has no pages
    text: str


@dataclass(frozen=True, slots=True)
class LoadedDocument:
    document_id: str
    title: str
    pages: tuple[Page, ...]
    url: str = ""
    metadata: dict[str, str] = field(default_factory=dict)
    #: a row's line in its file (1-based), 0 for a document that is a whole file: what names a row
    #: read but not stored, whose id may be blank or another row's
    line: int = 0


@dataclass(frozen=True, slots=True)
class Loaded:
    """What one source holds: its documents, and, for a file of rows (JSONL), the rows that could
    not be read, as (``line <n>``, why)."""

    documents: list[LoadedDocument]
    failed: list[tuple[str, str]] = field(default_factory=list)
    #: a file of rows, each its own document (named ``<file>:line <n> (<document id>)`` in errors)
    rows: bool = False


#: failed rows reported one by one for a file; the rest are counted in one more entry
MAX_ROW_ERRORS = 100


#: byte order marks and the encodings they say, UTF-32's before UTF-16's, whose marks begin theirs:
#: an editor on Windows (Notepad, PowerShell 5's redirection) saves text as UTF-16 with one
_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32-LE"), (codecs.BOM_UTF32_BE, "UTF-32-BE"), (codecs.BOM_UTF8, "UTF-8"),
         (codecs.BOM_UTF16_LE, "UTF-16-LE"), (codecs.BOM_UTF16_BE, "UTF-16-BE"))


def _bom(raw: bytes) -> tuple[str, int] | None:
    """The encoding ``raw``'s byte order mark says, and the mark's length; None without one."""
    return next(((name, len(mark)) for mark, name in _BOMS if raw.startswith(mark)), None)


def _text(raw: bytes, what: str) -> str:
    """``raw`` in the encoding its byte order mark says, else UTF-8: LoadError naming the encoding
    and the first byte it cannot read."""
    name, start = _bom(raw) or ("UTF-8", 0)
    try:
        return raw[start:].decode(name)
    except UnicodeDecodeError as exc:
        raise LoadError(f"{what} is not {name} text ({exc.reason} at byte {start + exc.start})") from None


def _stem(filename: str) -> str:
    return PurePath(filename).stem or filename


def _document_id(src: DocumentSource) -> str:
    """The caller's id, else the file's name without its extension: LoadError for a name that is an
    extension alone (".txt", which PurePath takes for a dot file's whole name: it was the id)."""
    if src.document_id:
        return src.document_id
    if PurePath(src.name).name.lower() in LOADERS:
        raise LoadError(f"needs a document_id: its file name '{src.name}' is an extension alone")
    return _stem(src.name)


#: control characters (Unicode's Cc: C0, DEL, C1) as spaces: a title, a url, a source and the
#: metadata are carried back in every hit as they are stored, and one holding ESC [31m, BEL or an
#: OSC 52 sequence (which writes the clipboard) was obeyed by the terminal of whoever printed it
_CONTROLS = dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)], " ")


def without_controls(text: str) -> str:
    """``text`` with its control characters spaces (:data:`_CONTROLS`)."""
    return text.translate(_CONTROLS)


def metadata_without_controls(metadata: Mapping[str, str]) -> dict[str, str]:
    """``metadata``'s keys and values :func:`without_controls`. ValueError when two keys are one
    once cleaned."""
    return metadata_each(metadata, without_controls, "once their control characters are spaces")


def _one_line_title(title: str) -> str:
    """``title`` on one line, its control characters spaces (:data:`_CONTROLS`)."""
    return one_line(without_controls(title))


def _found_title(title: object) -> str:
    """A title the file itself gives (a heading, <title>, the PDF's metadata): content, not a
    caller's field, so one over the limit is cut there instead of refusing the document; cut once
    normalized, which may lengthen it (U+0958 is two code points in NFC). Anything but a string
    (a PDF's /Title may be a number or an array) is no title, nor is one of white space, format or
    control characters alone (a /Title of "   " or "\\000" replaced the file name with nothing to
    read). White space is collapsed (:func:`one_line`): a PDF's or an HTML <title>'s padding and
    line breaks were kept in every result. Control characters are spaces (:data:`_CONTROLS`)."""
    if not isinstance(title, str):
        return ""
    title = _one_line_title(composed(title))
    return title[:MAX_TITLE_CHARS] if has_visible_text(title) else ""


def sent(value: str) -> str:
    """A caller's field (or a JSONL row's title) as sent, or "" (none sent) when it holds nothing
    visible: white space, format or control characters alone (a zero-width space, a NUL) read as
    nothing in a hit, and stood in for the file's own field."""
    return value if has_visible_text(value) else ""


def _title(src: DocumentSource, found: str = "") -> str:
    """The caller's title on one line, its control characters spaces as a file's are, else the
    file's own (``found``), else its name without its extension, cleaned the same way (a file
    name may hold ESC or a line break, and every reader's hit carries the title): a caller's title
    of nothing visible (:func:`sent`) was stored, over the file's."""
    return _one_line_title(sent(src.title)) or found or _one_line_title(_stem(src.name))


def _load_text(src: DocumentSource) -> list[LoadedDocument]:
    text = _text(src.content, "file")
    return [LoadedDocument(_document_id(src), _title(src), (Page(0, text),))]


#: an inline file as a link's or an image's target (``![diagram](data:image/png;base64,...)``): its
#: bytes as base64, no words. Left in, one 3 MB image made fifteen thousand chunks of noise to
#: embed and search. The media type is bounded (RFC 6838: 127 characters a name, with parameters),
#: and only text up to the last ")" is searched: a start that cannot end read on to the end of the
#: text, from every start (quadratic: 112 KB of "](data:" took a minute). The base64 ends at white
#: space (but for the line breaks of a wrapped one, each followed by more of it, after the
#: indentation and the ">" of the list item or block quote holding it), then a title on one line:
#: read up to any ")", a link left open took every paragraph up to the next one. It ends at "]"
#: too, which base64 never holds, so that no start reads past the next one.
_DATA_URI = re.compile(r"(\]\()\s*data:[^,)\s]{0,300};base64,[^)\]\s]*+(?:(?:\r\n?|\n)(?:[ \t]*+>)*+[ \t]*+[^)\]\s]++)*+"
                       r"(?:[ \t]+\"[^\"\r\n]*\"|[ \t]+'[^'\r\n]*')?[ \t]*(\))")
#: the same file as a reference definition's target (``[logo]: data:image/png;base64,...``) or an
#: HTML image's source in Markdown (``<img src="data:...">``), each ending at white space or a quote
_DATA_TARGET = re.compile(r"(^[ ]{0,3}\[[^\]\r\n]{1,999}\]:[ \t]*|\bsrc[ \t]*=[ \t]*[\"']?)<?data:[^,\s\"'>]{0,300};base64,[^\s\"'>]*+>?",
                          flags=re.MULTILINE | re.IGNORECASE)


def _without_data_uris(text: str) -> str:
    last = text.rfind(")") + 1
    return _DATA_TARGET.sub(r"\1", _DATA_URI.sub(r"\1\2", text[:last]) + text[last:])


def _markdown_title(text: str) -> str:
    """The text of the first ``# `` heading outside front matter and code blocks (an empty one names
    nothing): a shell comment in a fenced block, or a YAML comment in front matter, is no heading. A line ends at LF, CRLF
    or CR alone (old Mac files: their whole text was taken for the title). Front matter opens at a
    first line ``---`` followed by one that is not blank, and needs its closing line (as Pandoc
    reads it): a ``---`` that never closes, or before a blank line, is a thematic break, and took
    the file's every heading for front matter."""
    lines = text.splitlines(keepends=True)
    start = 0
    if len(lines) > 1 and lines[0].rstrip() == "---" and lines[1].strip():
        start = next((i + 1 for i in range(1, len(lines)) if lines[i].rstrip() in ("---", "...")), 0)
    return next((h.text for h in headings("".join(lines[start:])) if h.level == 1 and h.text), "")


def _load_markdown(src: DocumentSource) -> list[LoadedDocument]:
    text = _without_data_uris(_text(src.content, "file"))
    return [LoadedDocument(_document_id(src), _title(src, _found_title(_markdown_title(text))), (Page(0, text),))]


#: BeautifulSoup holds about 600 bytes a tag: 16 MiB of "<b>" (5.6 million tags) took 3.4 GB and
#: 85 s. A page of that size has about half a million; each "<" counts, an upper bound.
MAX_HTML_TAGS = 1_000_000


#: elements that end a line of text; any other tag sits inside a word or a sentence
#: ("H<sub>2</sub>O", "<b>un</b>believable"), whose text must stay together
_BLOCKS = frozenset({
    "address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "dialog", "div", "dl", "dt",
    "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup",
    "hr", "legend", "li", "main", "nav", "ol", "option", "p", "pre", "section", "summary", "table", "tbody", "td",
    "tfoot", "th", "thead", "tr", "ul",
})


def _page_text(root: Any) -> str:
    """The text of ``root`` as a page shows it: block elements become line breaks so sentences and
    paragraphs survive the flattening, inline ones join their text. Walked with a stack, not
    recursion (a page nests deeper than Python recurses) nor by inserting line breaks into the
    tree (bs4 finds a node's place among its siblings by a scan: 500,000 paragraphs never ended)."""
    from bs4 import CData, NavigableString, Tag

    out: list[str] = []
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if node is None:  # a block element's end
            out.append("\n")
        elif isinstance(node, Tag):
            if node.name in _BLOCKS:
                out.append("\n")
                stack.append(None)
            stack.extend(reversed(node.contents))
        elif type(node) in (NavigableString, CData):  # not comments, doctypes or declarations
            out.append(node)
    return "".join(out)


#: the bytes a browser reads for a <meta charset> before it starts decoding (WHATWG's prescan);
#: bs4's pattern for it is quadratic in what it reads (a run of "<meta " with no ">": 32 KB took
#: a second), and by default it read a twentieth of the file
HTML_PRESCAN_BYTES = 1024

#: the codec browsers decode a page of a charset with (the WHATWG Encoding Standard), by Python's
#: name for the charset: they read these labels as the vendor supersets shipped under them, whose
#: characters Python's strict codecs refuse, failing the whole page (NEC's "①" and IBM's "髙" in
#: Shift_JIS, GBK's "镕" in GB2312, UHC's "똠" in EUC-KR), or read as C1 controls ("€" in
#: ISO-8859-9 and TIS-620, "“" in Latin-1). EUC-JP stays Python's euc_jp, narrower than the
#: browsers' (it refuses NEC's row 13, "①"), as no Python codec is theirs.
_BROWSER_CODECS = {
    "ascii": "cp1252", "iso8859-1": "cp1252", "iso8859-9": "cp1254", "tis-620": "cp874", "iso8859-11": "cp874",
    "shift_jis": "cp932", "gb2312": "gb18030", "gbk": "gb18030", "euc_kr": "cp949", "big5": "big5hkscs",
}
#: the labels the WHATWG Encoding Standard gives an encoding (https://encoding.spec.whatwg.org/#names-and-labels)
#: that Python's codecs.lookup does not know, by a name it does: a page declaring one was refused,
#: "windows-874" (WHATWG's own name for Thai), "x-sjis" and "x-gbk" among them, and "koi8-ru",
#: which the standard reads as KOI8-U (:data:`_WHATWG_KOI8_U`). Python's mac_cyrillic is the
#: standard's x-mac-cyrillic byte for byte (its index, "Ґ" at 0xA2, "ґ" at 0xB6, "€" at 0xFF), so its two labels are read with it.
_WHATWG_LABELS = {
    "windows-874": "cp874", "dos-874": "cp874", "x-sjis": "shift_jis", "windows-31j": "shift_jis",
    "x-gbk": "gbk", "gb_2312": "gbk", "gb_2312-80": "gbk", "csgb2312": "gbk", "ks_c_5601-1989": "euc_kr",
    "ksc_5601": "euc_kr", "windows-949": "euc_kr", "cseuckr": "euc_kr", "csksc56011987": "euc_kr", "iso-ir-149": "euc_kr",
    "x-euc-jp": "euc_jp", "cseucpkdfmtjapanese": "euc_jp", "cn-big5": "big5", "x-x-big5": "big5",
    "mac": "mac_roman", "x-mac-roman": "mac_roman", "csmacintosh": "mac_roman", "koi": "koi8_r", "koi8": "koi8_r",
    "koi8-ru": "koi8_u", "x-mac-cyrillic": "mac_cyrillic", "x-mac-ukrainian": "mac_cyrillic",
    "unicode-1-1-utf-8": "utf-8", "unicode11utf8": "utf-8", "unicode20utf8": "utf-8", "x-unicode20utf8": "utf-8",
    "csisolatin9": "iso8859_15", "sun_eu_greek": "iso8859_7", "iso-8859-6-e": "iso8859_6", "iso-8859-6-i": "iso8859_6",
    "csiso88596e": "iso8859_6", "csiso88596i": "iso8859_6", "iso-8859-8-e": "iso8859_8", "csiso88598e": "iso8859_8",
    "visual": "iso8859_8", "iso-8859-8-i": "iso8859_8", "csiso88598i": "iso8859_8", "logical": "iso8859_8",
    **{f"x-cp125{i}": f"cp125{i}" for i in range(9)},
    **{f"iso8859{n}": f"iso8859_{n}" for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15)},
}
#: the standard's KOI8-U (both "koi8-u" and "koi8-ru" name it) is Python's koi8_u but for 0xAE and
#: 0xBE, Belarusian "ў" and "Ў" (the letters KOI8-RU added), which koi8_u reads as box drawing; no
#: other byte of koi8_u decodes to those two, so translating its text back is exact
_WHATWG_KOI8_U = str.maketrans("\u255d\u256c", "\u045e\u040e")
#: Windows' one-byte code pages, whose bytes 0x80-0x9F without a character (cp1252's five) browsers
#: read as the C1 controls of their values
_WINDOWS_ONE_BYTE = frozenset({"cp874", *(f"cp125{i}" for i in range(9))})
_C1_CONTROLS = "retrieval-c1-controls"


def _c1_controls(exc: UnicodeError) -> tuple[str, int]:
    """The error handler :data:`_WINDOWS_ONE_BYTE` decode with: a byte of 0x80-0x9F as its C1
    control, as browsers read it. Any other byte the code page has no character for stays an error,
    where browsers show U+FFFD: such a byte mostly means the page is not in the charset it declares,
    whose text, indexed as read, no query would find; the error names the byte, as for every other
    encoding, so that the charset can be corrected."""
    if isinstance(exc, UnicodeDecodeError) and all(0x80 <= b < 0xA0 for b in exc.object[exc.start:exc.end]):
        return exc.object[exc.start:exc.end].decode("latin-1"), exc.end
    raise exc


codecs.register_error(_C1_CONTROLS, _c1_controls)


def _html_text(raw: bytes) -> str:
    """``raw`` decoded as a browser decodes a page: by its byte order mark, else by the charset its
    <meta> gives (or an XML declaration), in the codec browsers read it with
    (:data:`_BROWSER_CODECS`), else as UTF-8 (LoadError when it is not). A charset
    neither Python nor :data:`_WHATWG_LABELS` knows, or a UTF-16 or UTF-32 one without a byte order mark (which browsers take
    for UTF-8: the <meta> itself was read as ASCII), is no charset."""
    from bs4.dammit import EncodingDetector

    if _bom(raw):
        return _text(raw, "file")
    declared = EncodingDetector.find_declared_encoding(raw[:HTML_PRESCAN_BYTES], is_html=True) or ""
    try:
        codec = codecs.lookup(_WHATWG_LABELS.get(declared.lower(), declared)).name if declared else ""
    except LookupError:
        codec = ""
    codec = _BROWSER_CODECS.get(codec, codec)
    if codec and codec != "utf-8" and not codec.startswith(("utf-16", "utf-32")):
        try:
            text = raw.decode(codec, _C1_CONTROLS if codec in _WINDOWS_ONE_BYTE else "strict")
        except UnicodeDecodeError as exc:
            raise LoadError(f"file is not {declared[:40]} text, the charset it declares ({exc.reason} at byte {exc.start})") from None
        return text.translate(_WHATWG_KOI8_U) if codec == "koi8-u" else text
    try:
        return _text(raw, "file")
    except LoadError as exc:
        if declared and not codec:
            raise LoadError(f"{exc}, and the charset it declares, '{declared[:40]}', is none known") from None
        raise


def _load_html(src: DocumentSource) -> list[LoadedDocument]:
    from bs4 import BeautifulSoup

    if (tags := src.content.count(b"<")) > MAX_HTML_TAGS:
        raise LoadError(f"it has more than {MAX_HTML_TAGS} tags ({tags} '<'): convert it to text first")
    # libxml2's parser: html.parser rescanned the rest of the file for each tag, comment or
    # processing instruction left open ("<a" 200,000 times: 44 s; 400,000: 127 s). Without
    # huge_tree, libxml2 keeps a comment of over 10,000,000 characters as text, which was indexed.
    soup = BeautifulSoup(_html_text(src.content), "lxml", huge_tree=True)
    # An SVG's <title> is the accessible text of a drawing (a chart's "Revenue by quarter"): the
    # body's content, neither the page's title nor left out with it.
    titles = [t for t in soup("title") if t.find_parent("svg") is None]
    title = _title(src, _found_title(titles[0].get_text()) if titles else "")
    # The whole tree, not its <body>: libxml2 keeps text after </html> or in a second <body> as
    # their own elements beside the first body, and all of it was dropped.
    for tag in [*titles, *soup(["head", "script", "style", "noscript", "template"])]:
        tag.decompose()
    text = re.sub(r"\n\s*\n+", "\n\n", _page_text(soup)).strip()
    return [LoadedDocument(_document_id(src), title, (Page(0, text),))]


#: A PDF's text in characters per byte of the file, at most. Flate packs text 3 to 5 times and a
#: page's content stream spends bytes on fonts and positions, so a real file holds a few characters
#: a byte at most; a small file may hold up to PDF_MIN_TEXT_CHARS (16 a byte of 16 KiB). The
#: limit is checked after each page: one page can still make what pypdf lets one stream hold.
PDF_TEXT_PER_BYTE = 16
PDF_MIN_TEXT_CHARS = 1 << 18

#: A PDF's content streams, decoded, in bytes per byte of the file, at most: the work of reading
#: its text, which pypdf parses at under a megabyte a second whether the stream shows text or only
#: draws. Flate packs operators a thousand times, so a 4.7 KB file of 100,000 drawing operators a
#: page held the ingest thread 2 to 3 s a page. Flate packs a real page's operators 3 to 5 times
#: and a file spends bytes on fonts and images too, so its streams decode to a few bytes a byte; a
#: small file may decode to PDF_MIN_CONTENT_BYTES (4 MiB: about 6 s of parsing), and no file to
#: more than PDF_CONTENT_PER_DOCUMENT_BYTE times the largest a document may be (what a file of that
#: size packed 4 times decodes to). Counted before each page is read, a stream read before not again.
PDF_CONTENT_PER_BYTE = 16
PDF_MIN_CONTENT_BYTES = 1 << 22
PDF_CONTENT_PER_DOCUMENT_BYTE = 4


#: the Latin ligatures (U+FB00 to U+FB06: ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ) as the letters they join: a PDF's font
#: may map a glyph to one, and "ﬁnancial" matched no query for "financial" in either leg (NFC keeps
#: them). Only these: NFKC would fold much a document means as written (superscripts, "½", "™").
_LIGATURES = {c: unicodedata.normalize("NFKC", chr(c)) for c in range(0xFB00, 0xFB07)}


def _contents(page: Any) -> tuple[tuple[tuple[int, int], ...] | None, int]:
    """The references of a page's content streams (one, or an array of them), None when one is
    written in the page itself (which no other page can show), and their size decoded. pypdf keeps
    a stream once decoded, so reading its text decodes it no more."""
    from pypdf.generic import ArrayObject, IndirectObject, StreamObject

    if "/Contents" not in page:
        return (), 0
    written = page.raw_get("/Contents")
    resolved = written.get_object()
    streams = list(resolved) if isinstance(resolved, ArrayObject) else [written]
    refs = tuple((s.idnum, s.generation) for s in streams if isinstance(s, IndirectObject))
    size = sum(len(obj.get_data()) for s in streams if isinstance(obj := s.get_object(), StreamObject))
    return (refs if len(refs) == len(streams) else None), size


def _resources(page: Any) -> tuple[int, int] | bytes:
    """What a page's content streams draw with (fonts, form XObjects): its /Resources' reference,
    or the dictionary as written when it is in the page (as pypdf writes it: its references as
    "n g R", so two pages naming the same objects write it the same). One stream ("q /Fm0 Do Q",
    as cpdf -squeeze leaves it) shows each page's own form under that page's /Fm0."""
    import hashlib

    from pypdf.generic import IndirectObject

    if "/Resources" not in page:  # pypdf copies a /Pages node's resources into each page it reads
        return b""
    written = page.raw_get("/Resources")
    if isinstance(written, IndirectObject):
        return written.idnum, written.generation
    out = io.BytesIO()
    written.write_to_stream(out)
    return hashlib.sha256(out.getvalue()).digest()


def _load_pdf(src: DocumentSource, max_document_bytes: int | None = None) -> list[LoadedDocument]:
    """Its text is held to :data:`PDF_TEXT_PER_BYTE` characters a byte (at least
    :data:`PDF_MIN_TEXT_CHARS`), and to ``max_document_bytes`` characters; its content streams, the
    work of reading that text, to :data:`PDF_CONTENT_PER_BYTE` bytes a byte decoded (at least
    :data:`PDF_MIN_CONTENT_BYTES`), and to :data:`PDF_CONTENT_PER_DOCUMENT_BYTE` times
    ``max_document_bytes``. Its pages may share one content stream, which pypdf reads again for
    each, at about 0.1 million characters a second: a 12 KB file of 60 pages made 6 million
    characters in a minute, and one of text-less drawing held the ingest thread for seconds a page.
    So a page showing streams already read, with the same resources, takes the text they gave: a
    file shows one stream on several pages to repeat a page (a blank, a letterhead), and reading it
    again for each let a small file hold the thread without bound. Under other resources the same
    stream shows other text ("q /Fm0 Do Q", each page's /Fm0 its own form), so it is read again."""
    from pypdf import PdfReader

    limit = max(PDF_MIN_TEXT_CHARS, PDF_TEXT_PER_BYTE * len(src.content))
    if max_document_bytes is not None and max_document_bytes < limit:
        limit, why = max_document_bytes, "more than a text file of the largest size may hold (RETRIEVAL_MAX_DOCUMENT_BYTES)"
    else:
        why = f"more than {PDF_TEXT_PER_BYTE} a byte of the file, as pages that share one content stream make"
    budget = max(PDF_MIN_CONTENT_BYTES, PDF_CONTENT_PER_BYTE * len(src.content))
    if max_document_bytes is not None and PDF_CONTENT_PER_DOCUMENT_BYTE * max_document_bytes < budget:
        budget = PDF_CONTENT_PER_DOCUMENT_BYTE * max_document_bytes
        over = f"{PDF_CONTENT_PER_DOCUMENT_BYTE} times the largest document (RETRIEVAL_MAX_DOCUMENT_BYTES)"
    else:
        over = f"{PDF_CONTENT_PER_BYTE} bytes a byte of the file (at least {PDF_MIN_CONTENT_BYTES})"
    try:
        reader = PdfReader(io.BytesIO(src.content))
        found: list[Page] = []
        read: dict[tuple[tuple[tuple[int, int], ...], tuple[int, int] | bytes], str] = {}
        chars = content = 0
        for i, page in enumerate(reader.pages):
            refs, size = _contents(page)
            shown = None if refs is None else (refs, _resources(page))
            if shown is None or (text := read.get(shown)) is None:
                content += size
                if content > budget:
                    raise LoadError(f"its content streams are over {budget} bytes decoded by page {i + 1}, more than {over}")
                text = (page.extract_text() or "").translate(_LIGATURES)
                if shown is not None:
                    read[shown] = text
            found.append(Page(i + 1, text))
            chars += len(text)
            if chars > limit:
                raise LoadError(f"its text is over {limit} characters by page {i + 1}, {why}")
        pages = tuple(found)
        meta_title = reader.metadata.title if reader.metadata else None
        if isinstance(meta_title, str):
            meta_title = meta_title.translate(_LIGATURES)
    except LoadError:
        raise
    except Exception as exc:
        raise LoadError(f"not a readable PDF: {type(exc).__name__}: {str(exc)[:200]}") from None
    if not any(p.text.strip() for p in pages):
        raise LoadError("PDF has no extractable text (scanned images need OCR first)")
    return [LoadedDocument(_document_id(src), _title(src, _found_title(meta_title)), pages)]


def _check_unicode(values: list[str], what: str) -> None:
    """LoadError unless every value is Unicode text. JSON may escape a lone UTF-16 surrogate
    (``\\ud800``), which json.loads turns into a str that the tokenizer, SQLite and UTF-8 encoding
    all refuse later, each with its own exception: the whole request would fail, not the row."""
    for value in values:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise LoadError(f"{what} is not valid Unicode (a lone surrogate)") from None


def _json_value(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _row(line: str, number: int) -> LoadedDocument:
    """One BEIR row, line ``number`` of its file. LoadError saying why for a row that is not one
    (the caller names its line)."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LoadError(f"invalid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # an integer over Python's 4,300 digits; nesting past its stack
        raise LoadError(f"unreadable JSON ({type(exc).__name__})") from None
    if not isinstance(row, dict) or "_id" not in row or "text" not in row:
        raise LoadError("a BEIR row needs '_id' and 'text'")
    # bool is an int, and str(None) would become the id "None": only real strings and integers.
    if isinstance(row["_id"], bool) or not isinstance(row["_id"], (str, int)):
        raise LoadError(f"'_id' must be a string or an integer (got {json.dumps(row['_id'])[:40]})")
    if not isinstance(row["text"], str):
        raise LoadError("'text' must be a string")
    if (title := row.get("title")) is None:
        title = ""
    elif not isinstance(title, str):
        raise LoadError(f"'title' must be a string (got {json.dumps(title)[:40]})")
    # One of nothing visible is none, as a caller's is: it would lead the text, and every hit, unseen.
    title = _one_line_title(sent(title))
    text = row["text"]
    meta = row.get("metadata") or {}
    # A value as JSON writes it, not as Python does: str() made null "None", true "True" and a list
    # "['nlp', 'ir']". A null is no value.
    metadata = {str(k): _json_value(v) for k, v in meta.items() if v is not None} if isinstance(meta, dict) else {}
    for name, values in (("_id", [str(row["_id"])]), ("title", [title]), ("text", [text]), ("metadata", [*metadata, *metadata.values()])):
        _check_unicode(values, f"'{name}'")
    # Keys and values with their control characters spaces, as the title's are: every context
    # carries the metadata (the url with it) back as stored. Two keys that are one once cleaned or
    # composed are the row's own error, not one of their values dropped when it is stored.
    try:
        metadata = metadata_without_controls(metadata)
        composed_metadata(metadata)
    except ValueError as exc:
        raise LoadError(str(exc)) from None
    url = metadata.get("url", "")
    return LoadedDocument(
        document_id=str(row["_id"]),
        title=title,
        # The title leads the text so both the dense and the keyword legs see it.
        pages=(Page(0, f"{title}\n\n{text}" if title else text),),
        url=url,
        metadata=metadata,
        line=number,
    )


_ROW_END = re.compile(r"\r\n?|\n")


def _load_jsonl(src: DocumentSource) -> Loaded:
    """Each row its own document: a row that cannot be read is that row's error, and the others
    are stored. A file none of whose rows can be read is not JSONL: one error, the first row's."""
    docs: list[LoadedDocument] = []
    failed: list[tuple[str, str]] = []
    # Rows end at line breaks JSON cannot hold inside a string (LF, CR, CR LF): it holds U+2028,
    # U+2029 and U+0085 unescaped there, where splitlines() cut a row in two.
    for n, line in enumerate(_ROW_END.split(_text(src.content, "file")), start=1):
        if not line.strip():
            continue
        try:
            docs.append(_row(line, n))
        except LoadError as exc:
            # The line is named once, where the failure is listed ("rows.jsonl:line 2"): the reason
            # repeated it ("rows.jsonl:line 2: line 2: invalid JSON").
            failed.append((f"line {n}", str(exc)))
    if failed and not docs:
        raise LoadError(f"{failed[0][0]}: {failed[0][1]}" + (f" (and {len(failed) - 1} more rows)" if len(failed) > 1 else ""))
    if len(failed) > MAX_ROW_ERRORS:
        more = len(failed) - MAX_ROW_ERRORS
        failed = [*failed[:MAX_ROW_ERRORS], (f"line {failed[MAX_ROW_ERRORS][0].split()[-1]}+", f"{more} more rows could not be read")]
    return Loaded(docs, failed, rows=True)


LOADERS: dict[str, Callable[[DocumentSource], list[LoadedDocument] | Loaded]] = {
    ".txt": _load_text,
    ".md": _load_markdown,
    ".markdown": _load_markdown,
    ".html": _load_html,
    ".htm": _load_html,
    ".pdf": _load_pdf,
    ".jsonl": _load_jsonl,
}


def _composed(doc: LoadedDocument) -> LoadedDocument:
    return dataclasses.replace(
        doc,
        title=composed(doc.title),
        pages=tuple(Page(p.number, composed(p.text)) for p in doc.pages),
        url=composed(doc.url),
        metadata=composed_metadata(doc.metadata),
    )


def load(src: DocumentSource, max_document_bytes: int | None = None) -> Loaded:
    """Parse one source into documents (several for .jsonl, with the rows that failed). Raises
    :class:`LoadError`, and only that. ``max_document_bytes`` (RETRIEVAL_MAX_DOCUMENT_BYTES) bounds
    the text of a format whose text may be larger than its bytes, and the work of reading it (PDF);
    the others hold no more than their bytes.

    Parsers of untrusted files fail in ways nobody lists (pypdf raises AssertionError and
    AttributeError on some malformed files): whatever a loader raises is this file's error, so
    one bad file never fails the rest of a batch.
    """
    name = PurePath(src.name).name.lower()
    # A name that is only an extension (".txt": a document_id ending in "/" and no filename) has no
    # suffix to Python, as a dot file; it names its type all the same.
    ext = PurePath(name).suffix or (name if name in LOADERS else "")
    loader = LOADERS.get(ext)
    if loader is None:
        raise LoadError(f"unsupported file type '{ext or '(none)'}' (supported: {', '.join(sorted(LOADERS))})")
    try:
        loaded = _load_pdf(src, max_document_bytes) if loader is _load_pdf else loader(src)
        if not isinstance(loaded, Loaded):
            loaded = Loaded(loaded)
        return dataclasses.replace(loaded, documents=[_composed(doc) for doc in loaded.documents])
    except LoadError:
        raise
    except Exception as exc:
        raise LoadError(f"cannot read this {ext[1:].upper()} file ({type(exc).__name__}: {str(exc)[:200]})") from None
