"""Markdown headings as CommonMark reads them, one reading for a Markdown file's title
(:mod:`.loaders`) and for the sentences a heading line ends (:mod:`.graph_extraction`): each had
its own pattern, and a shell comment in a fenced block was no title yet a heading to the other."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

#: An ATX heading line, read in one pass (a lazy pattern was cubic in a line of spaces): indented
#: by up to 3 spaces (4, or a tab, make it code), one to six #, then a space, a tab or the line's
#: end ("#5", "#include" and "#rust" are none).
ATX_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*))?")
#: a code fence's opening or closing line: its character and length (CommonMark)
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
#: what str.splitlines ends a line at: LF, CRLF, CR alone (old Mac files) and the rest
_LINE_ENDS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"


@dataclass(frozen=True, slots=True)
class Heading:
    #: where its line starts in the text, and ends (its line break left out)
    start: int
    end: int
    level: int
    #: without its hashes, its closing ones and the white space around
    text: str


def _heading_text(line: str) -> str:
    """A heading without its closing hashes, which CommonMark takes only after a space: "Title ##"
    is "Title", "Learning C#" keeps its hash, and "##" is an empty heading."""
    line = line.rstrip()
    bare = line.rstrip("#")
    if not bare:
        return ""
    return bare.rstrip() if bare != line and bare[-1] in " \t" else line


def headings(text: str) -> Iterator[Heading]:
    """The ATX heading lines of ``text`` outside fenced code blocks: a shell or Python comment in
    one is no heading. A fence that never closes runs to the text's end, as CommonMark reads it."""
    if "#" not in text:
        return
    fence = ""
    end = 0
    for line in text.splitlines(keepends=True):
        start, end = end, end + len(line)
        line = line.rstrip(_LINE_ENDS)
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) and not line[opened.end():].strip():
                fence = ""
        elif opened:
            fence = opened.group(1)
        elif heading := ATX_HEADING.fullmatch(line):
            yield Heading(start, start + len(line), len(heading.group(1)), _heading_text(heading.group(2) or ""))
