"""Reading a file to send, apart from the client: `retrieval-server ingest --local` reads files
the same way and loads neither gRPC nor the generated code."""

from __future__ import annotations

import stat
from pathlib import Path

#: the largest message the client sends or accepts
MAX_MESSAGE = 256 * 1024 * 1024

#: what each kind of file but a regular one is, for the error that refuses it
_FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def file_bytes(path: Path | str, max_bytes: int = MAX_MESSAGE, limit: str = "the largest request this client sends") -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` (``limit`` names what sets
    it), checked before it is read: a 1 GB file took 1.3 GB of memory before the server refused it,
    and reading a FIFO waited for a writer that may never come. ValueError for anything but a
    regular file, which is not opened, and for one over ``max_bytes``; OSError when it cannot be
    read."""
    p = Path(path)
    st = p.stat()
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _FILE_KINDS if test(st.st_mode)), "of an unknown kind")
        raise ValueError(f"not a regular file ({kind})")
    too_large = f"over the limit of {max_bytes} bytes ({limit})"
    if st.st_size > max_bytes:
        raise ValueError(f"its size, {st.st_size} bytes, is {too_large}")
    with p.open("rb") as f:
        content = f.read(max_bytes + 1)
    if len(content) > max_bytes:  # it grew since
        raise ValueError(f"its size is {too_large}")
    return content
