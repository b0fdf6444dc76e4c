"""Write a minimal, valid multi-page PDF with one line of Helvetica text per page."""

from __future__ import annotations


def make_pdf(pages: list[str], title: str = "", to_unicode: dict[int, int] | None = None) -> bytes:
    """``to_unicode``: the font's ToUnicode map for these byte codes (to UTF-16 code units), each
    other printable ASCII byte mapped to itself, as a PDF's own map may say anything."""
    objects: list[bytes] = []
    n_pages = len(pages)
    # 1: catalog, 2: pages, 3: font, then per page: page object + content stream, then info, last the map.
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(n_pages))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    cmap_ref = f" /ToUnicode {4 + 2 * n_pages + 1} 0 R" if to_unicode else ""
    objects.append(f"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica{cmap_ref} >>".encode())
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream")
    objects.append(f"<< /Title ({title}) >>".encode())
    if to_unicode:
        pairs = {**{c: c for c in range(0x20, 0x7F)}, **to_unicode}
        cmap = (
            "/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /X def "
            "1 begincodespacerange <00> <FF> endcodespacerange "
            f"{len(pairs)} beginbfchar " + " ".join(f"<{a:02X}> <{b:04X}>" for a, b in pairs.items()) +
            " endbfchar endcmap CMapName currentdict /CMap defineresource pop end end"
        ).encode()
        objects.append(b"<< /Length " + str(len(cmap)).encode() + b" >>\nstream\n" + cmap + b"\nendstream")
    return _written(objects, f" /Info {4 + 2 * n_pages} 0 R")


def _written(objects: list[bytes], trailer: str = "") -> bytes:
    """The file of ``objects`` (numbered from 1, the first the catalog), its cross-reference table
    and trailer (``trailer``: more of its entries)."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for num, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{num} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def make_shared_stream_pdf(pages: int, words: int) -> bytes:
    """A PDF of ``pages`` pages that all show one Flate-compressed content stream of ``words``
    words: small on disk, and read again by pypdf for every page."""
    import zlib

    stream = zlib.compress(b"BT /F1 12 Tf 72 720 Td (word ) Tj ET\n" * words, 9)
    kids = " ".join(f"{5 + i} 0 R" for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length " + str(len(stream)).encode() + b" /Filter /FlateDecode >>\nstream\n" + stream + b"\nendstream",
    ]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents 4 0 R >>"] * pages
    return _written(objects)


def make_drawing_pdf(pages: int, operators: int) -> bytes:
    """A PDF of ``pages`` pages, each its own Flate-compressed content stream of ``operators``
    drawing operators and one word (``page<n>``): small on disk, and slow to parse."""
    import zlib

    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    for i in range(pages):
        stream = zlib.compress(b"0 0 m 1 1 l S\n" * operators + f"BT /F1 12 Tf 72 720 Td (page{i + 1}) Tj ET\n".encode(), 9)
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                       f"/Contents {5 + 2 * i} 0 R >>".encode())
        objects.append(b"<< /Length " + str(len(stream)).encode() + b" /Filter /FlateDecode >>\nstream\n" + stream + b"\nendstream")
    return _written(objects)


def make_shared_stream_form_pdf(pages: list[str], indirect_resources: bool = False) -> bytes:
    """A PDF whose pages all show one content stream, ``q /Fm0 Do Q`` (as a de-duplicating
    optimizer such as cpdf -squeeze leaves it), each page mapping /Fm0 to its own form XObject
    showing that page's text. ``indirect_resources``: each page's /Resources its own object."""
    shared = b"q /Fm0 Do Q"
    per_page = 3 if indirect_resources else 2
    kids = " ".join(f"{5 + per_page * i} 0 R" for i in range(len(pages)))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length " + str(len(shared)).encode() + b" >>\nstream\n" + shared + b"\nendstream",
    ]
    for i, text in enumerate(pages):
        first = 5 + per_page * i
        resources = f"<< /XObject << /Fm0 {first + 1} 0 R >> >>"
        form = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        written = f"{first + 2} 0 R" if indirect_resources else resources
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources {written} /Contents 4 0 R >>".encode())
        objects.append(b"<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Length "
                       + str(len(form)).encode() + b" >>\nstream\n" + form + b"\nendstream")
        if indirect_resources:
            objects.append(resources.encode())
    return _written(objects)
