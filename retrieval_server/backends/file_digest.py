"""A file's SHA-256, remembered across processes for as long as the file is unchanged.

The model file's digest names the vectors of an index, so every ``serve`` and every CLI command
that opens the service needs it; hashing 90 MB takes about 50 ms, a twentieth of ``ingest
--local`` on two small files. A file whose device, inode, size, modification time and change
time (in nanoseconds) are what they were when it was hashed is taken to be the same file, the
test git relies on. Any write changes the change time, which no tool can set back (``cp -p`` or
``touch -r`` can set back the modification time), so a replaced model is hashed again. Like
git's check for racily clean files, a file modified just before it was hashed is not
remembered: a file system stamps times in steps (up to 2 s on FAT), so a write within the same
step would keep its signature.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: The remembered digests, in the cache folder given (one JSON object: path -> stat + digest).
CACHE_FILE = "file-digests.json"
#: How long before its hashing a file must have last changed to be remembered.
SETTLED_NS = 2_000_000_000


def sha256_hex(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _signature(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def read_entries(cache: Path) -> dict[str, Any]:
    """The JSON object in ``cache``; empty when it is missing or unreadable (a cache only saves work)."""
    try:
        entries = json.loads(cache.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.debug("ignoring unreadable cache %s: %s", cache, exc)
        return {}
    return entries if isinstance(entries, dict) else {}


def cached_sha256(path: Path, cache_dir: Path | None) -> str:
    """``path``'s SHA-256 (hex), from ``cache_dir`` when the file has not changed since it was
    hashed there. A cache that cannot be read or written only costs the hashing."""
    if cache_dir is None:
        return sha256_hex(path)
    key = str(path.resolve())
    signature = _signature(path.stat())
    cache = cache_dir / CACHE_FILE
    entries = read_entries(cache)
    entry = entries.get(key)
    if isinstance(entry, dict) and entry.get("stat") == signature and isinstance(entry.get("sha256"), str):
        return str(entry["sha256"])
    started_ns = time.time_ns()
    digest = sha256_hex(path)
    # A file rewritten while it was read may have mixed old and new bytes into the digest.
    if _signature(path.stat()) != signature or signature[3] > started_ns - SETTLED_NS:
        return digest
    # Models of folders since removed are forgotten, so the file keeps to the models in use.
    entries = {k: v for k, v in entries.items() if Path(k).exists()}
    entries[key] = {"stat": signature, "sha256": digest}
    try:
        write_whole(cache, entries)
    except OSError as exc:
        log.debug("not remembering the digest of %s in %s: %s", path, cache_dir, exc)
    return digest


def write_whole(cache: Path, entries: dict[str, Any]) -> None:
    """Replace ``cache`` with ``entries`` as JSON. Processes starting together may each write:
    every write is whole (a rename), the last wins."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=f".{cache.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(entries, f)
        os.replace(tmp, cache)
    except BaseException:
        os.unlink(tmp)
        raise
