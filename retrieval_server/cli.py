"""retrieval-server serve | ingest | query | search | ask | delete | health | graph export | sample-corpus."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import sys
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

# Only what every command needs: a client command (query, search, health, ...) is one RPC, and its
# wall time is its imports. The service's settings, numpy, numba, onnxruntime and the engines are
# imported by the commands that run the service, and so is the domain (its 37 dataclasses are
# about 20 ms of a command's start): tests/e2e/test_stream_and_ask.py checks.
from retrieval_server import early_stop, startup_gc
from retrieval_server.request_limits import SEARCH_TOP_K_LIMIT, TOP_K_LIMIT

if TYPE_CHECKING:
    from retrieval.v1 import retrieval_pb2 as pb
    from retrieval_server.config import Settings
    from retrieval_server.domain import IngestedDocument

log = logging.getLogger("retrieval_server.cli")
T = TypeVar("T")

#: Commands that run (part of) the service in this process: they read RETRIEVAL_* settings.
_SERVICE_COMMANDS = frozenset({"serve", "graph"})
#: domain.Access's and domain.Strategy's values, and the roles a caller may name (Role's but
#: ANONYMOUS), spelled out so that a client command need not import the domain to parse its
#: arguments (tests/unit/test_cli_arguments.py holds them equal)
ACCESS_CHOICES = ("public", "private")
STRATEGY_CHOICES = ("semantic", "keyword", "hybrid", "adaptive", "graph")
ROLE_CHOICES = ("USER", "ADMIN", "SUPER_ADMIN")


def role(text: str) -> str:
    """A command's ``--role``, in any case: the server takes x-user-role's value exactly, upper
    case, and ``--role admin`` was sent as typed, to be refused as INVALID_ARGUMENT."""
    return text.upper()


def _is_service_error(exc: BaseException) -> bool:
    """A ServiceError can only come from a command that imported the domain."""
    domain = sys.modules.get("retrieval_server.domain")
    return domain is not None and isinstance(exc, domain.ServiceError)


#: characters that reorder what follows them on screen: a file name or title holding U+202E
#: shows its end reversed ("txt.exe" read as "exe.txt")
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _shown_as_is(c: str) -> bool:
    if c.isprintable() or c in "\n\t":
        return True
    category = unicodedata.category(c)
    # Other format characters are parts of text a terminal only draws: the joiners of emoji
    # sequences (👩‍💻) and of Persian and Indic words, the soft hyphen, the tags of a flag.
    return category == "Zs" or (category == "Cf" and c not in _BIDI_CONTROLS)


def printable(text: str) -> str:
    """``text`` from a server (a document's title or content, an answer, an error) as a terminal
    shows it and does not obey it: control characters (ESC, CR, C1) and bidi overrides written
    escaped, as ``\\x1b``; line breaks, tabs, spaces and the other invisible parts of text kept. A
    document holding ESC [2J cleared the screen of whoever queried it, and OSC 52 wrote their
    clipboard."""
    if text.isprintable():
        return text
    return "".join(c if _shown_as_is(c) else c.encode("unicode_escape").decode("ascii") for c in text)


def _files(paths: Sequence[str], errors: list[tuple[str, str]]) -> Iterator[Path]:
    """The files ``paths`` name, and in the folders they name (links to folders followed, each
    folder read once: a link may loop) every file of a supported type, in order, each file once: a
    file named and found in a folder named too, or by two paths, was reported as taking its own id.
    In a folder, a name starting with "." (``.git``, an editor's backup) is skipped, as ``ls`` skips
    it; a hidden file named is read. A folder that cannot be read and a link to nothing go to
    ``errors`` (they were skipped without a word)."""
    from retrieval_server.ingest.loaders import LOADERS

    def unreadable(exc: OSError) -> None:
        errors.append((str(exc.filename), exc.strerror or str(exc)))

    def dangling(path: str) -> bool:
        if os.path.islink(path) and not os.path.exists(path):
            errors.append((path, f"a symbolic link to {os.readlink(path)}, which does not exist"))
            return True
        return False

    files: set[tuple[int, int]] = set()

    def first_time(path: str) -> bool:
        try:
            st = os.stat(path)
        except OSError:
            return True  # reading it says why
        if (st.st_dev, st.st_ino) in files:
            return False
        files.add((st.st_dev, st.st_ino))
        return True

    seen: set[tuple[int, int]] = set()
    for raw in paths:
        if not os.path.isdir(raw):
            if not dangling(raw) and first_time(raw):
                yield Path(raw)
            continue
        for folder, folders, names in os.walk(raw, onerror=unreadable, followlinks=True):
            try:
                st = os.stat(folder)
            except OSError as exc:
                unreadable(exc)
                continue
            if (st.st_dev, st.st_ino) in seen:
                folders.clear()
                continue
            seen.add((st.st_dev, st.st_ino))
            folders[:] = sorted(f for f in folders if not f.startswith("."))
            for name in sorted(n for n in names if not n.startswith(".")):
                f = os.path.join(folder, name)
                if not dangling(f) and os.path.splitext(name)[1].lower() in LOADERS and first_time(f):
                    yield Path(f)


def _nothing_to_ingest(paths: Sequence[str], errors: list[tuple[str, str]]) -> int:
    """A run that found no file: exit 1, and say which files it reads (it exited 0, "0 documents
    indexed, 0 failed", as if a folder of .docx files had been ingested)."""
    from retrieval_server.ingest.loaders import LOADERS

    print(f"no file to ingest in {', '.join(paths)}: a folder's files are read when their names end in "
          f"{', '.join(sorted(LOADERS))} and do not start with '.'", file=sys.stderr)
    _print_ingest([], errors)
    return 1


def _escaped(value: str | os.PathLike[str]) -> str:
    """``value`` as a terminal can print it: bytes that are not UTF-8 (lone surrogates) shown escaped."""
    return os.fsencode(value).decode("utf-8", "backslashreplace")


def _printable_ascii(value: str) -> bool:
    """Whether gRPC metadata can carry ``value`` as an ASCII header's value."""
    return all(" " <= c <= "~" for c in value)


def utf8_text(value: str) -> str:
    """An argument a request carries as text (a question, an id, an owner, metadata): UTF-8. Bytes
    of another encoding (a Latin-1 terminal's é) reach Python as lone surrogates, which failed at
    the call as a UnicodeEncodeError naming no option, or, for ``ingest``, once for every file."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(f"must be UTF-8 text, as a request carries it (got '{_escaped(value)}', bytes of another encoding)") from None
    return value


def user_id_header(value: str) -> str:
    """A ``--user``: printable ASCII, as gRPC metadata (x-user-id) carries it; the client's refusal
    was "ValueError: the user id must ..." with exit 1, naming no option."""
    if not _printable_ascii(value):
        raise argparse.ArgumentTypeError(f"must be printable ASCII, as the x-user-id header is (got '{_escaped(value)}'; "
                                         "a user id beyond ASCII travels in a token's claims: --token)")
    return value


#: a ``host:port`` (``[v6]:port``) as gRPC's dns resolver reads it, its port apart
_HOST_PORT = re.compile(r"(?:\[[^\]]*\]|[^:\[\]/]*):(?P<port>[0-9]+)")


def _port_out_of_range(target: str) -> int | None:
    """The port of a gRPC target that no port is (0, or past 65535, which gRPC took modulo 65536),
    for the forms that name one: ``host:port``, ``dns:``, and the ``ipv4:``/``ipv6:`` lists."""
    from urllib.parse import unquote

    from retrieval_client.targets import resolver_path

    # gRPC drops a query and a fragment and decodes %-escapes (as targets.is_loopback reads them):
    # read around them, "localhost:99999?x" passed, and gRPC connected to port 34463.
    uri = target.partition("#")[0].partition("?")[0]
    scheme, _, rest = uri.partition(":")
    if scheme in ("dns", "ipv4", "ipv6"):
        addresses = unquote(resolver_path(rest) or "").split(",")
    elif scheme in ("unix", "unix-abstract"):
        return None  # a path, whatever its digits
    else:
        addresses = [unquote(uri)]  # a scheme gRPC does not know is the host of dns:///<target>
    for address in addresses:
        if (m := _HOST_PORT.fullmatch(address)) and not 1 <= int(m["port"]) <= 65535:
            return int(m["port"])
    return None


def key_value(pair: str) -> tuple[str, str]:
    """An ``--meta`` pair, read with the other arguments: malformed, it is a usage error before the
    run starts (it was found at the first file, after ``--local`` had loaded the model)."""
    key, sep, value = utf8_text(pair).partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expects key=value, got '{pair}'")
    return key, value


#: what one ingest call carries at most: files, and bytes (the server reads 64 MiB a request by
#: default, and ``--local`` holds a call's files in memory); a larger file goes alone
BATCH_FILES = 32
BATCH_BYTES = 32 * 1024 * 1024


def _batches(files: Sequence[Path]) -> Iterator[list[Path]]:
    """``files`` in order, in runs of at most :data:`BATCH_FILES` files and :data:`BATCH_BYTES`
    (by their sizes now; one that cannot be read is left for its reading to report), no two of one
    name: the server names a failure by the file's name, which :func:`_at_path` makes its path again."""
    batch: list[Path] = []
    size = 0
    for f in files:
        try:
            n = f.stat().st_size
        except OSError:
            n = 0
        if batch and (len(batch) == BATCH_FILES or size + n > BATCH_BYTES or any(b.name == f.name for b in batch)):
            yield batch
            batch, size = [], 0
        batch.append(f)
        size += n
    if batch:
        yield batch


def _at_path(failures: Iterable[tuple[str, str]], paths: dict[str, str]) -> list[tuple[str, str]]:
    """An ingest's failures as the server names them (``<file name>``, ``<file name>:line <n> (<id>)``)
    with the file's name replaced by the path it was read from (``paths``, by name: a request holds
    one file of a name): two folders' corpus.jsonl failed as one "corpus.jsonl:line 2"."""
    names = sorted(paths, key=len, reverse=True)  # of "a.txt" and "a.txt:2.txt", the longer that fits
    out = []
    for source, reason in failures:
        name = next((n for n in names if source == n or source.startswith(n + ":")), None)
        out.append((source if name is None else paths[name] + source[len(name):], reason))
    return out


def _derived_id(f: Path, document_id: str) -> str | None:
    """The id the server gives a file's document (None for a file of rows, each with its own id),
    as its entry points clean it: the name without its extension, unless given."""
    from retrieval_server.identifiers import trim

    if f.suffix.lower() == ".jsonl":
        return None
    raw = document_id or f.stem
    try:
        return trim(raw)
    except ValueError:
        return raw  # the server refuses it, and says why


class _Ids:
    """The documents of a run, by id, with the file each came from: a later file with the id of an
    earlier one (two folders' index.txt, a file named as a JSONL row's id) is that file's error. In
    one request the server refuses it; in a later one, it silently replaced the first."""

    def __init__(self, document_id: str) -> None:
        self._document_id = document_id
        self._files: dict[str, str] = {}

    def taken(self, f: Path) -> str | None:
        """Why ``f`` is not sent (None: it is, and its id is now taken)."""
        doc_id = _derived_id(f, self._document_id)
        if doc_id is None:
            return None
        if doc_id in self._files:
            return f"document_id '{doc_id}' is also {self._files[doc_id]}'s: give the files other names, or ingest them apart"
        self._files[doc_id] = str(f)
        return None

    def stored(self, sources: Sequence[str], document_ids: Iterable[str]) -> list[tuple[str, str]]:
        """Takes the ids of the documents stored from files ``sources`` (one request's), which the
        rows of a JSONL file only now tell; the errors of the rows that replaced a document an
        earlier request of the run stored (a row's id is not known before it is sent)."""
        derived = {s: _derived_id(Path(s), self._document_id) for s in sources}
        rows = " or ".join(s for s, doc_id in derived.items() if doc_id is None)
        errors: list[tuple[str, str]] = []
        for doc_id in document_ids:
            if doc_id in derived.values() or not rows:
                continue
            if doc_id in self._files:
                # Its line is not in the answer: named by its id alone, as the server names a row
                # not stored (`<file>:line <n> (<id>)`) but for the line.
                errors.append((f"{rows} ({doc_id})", f"document_id '{doc_id}' is also {self._files[doc_id]}'s, stored before in this run, "
                                                   "which this row replaced: give the documents other ids, or ingest them apart"))
            else:
                self._files[doc_id] = rows
        return errors


def _readable(batch: Sequence[Path], ids: _Ids, errors: list[tuple[str, str]], read: Callable[[Path], T]) -> list[T]:
    """What ``read`` makes of each file of ``batch`` whose id no earlier file took and that can be
    read; the others go to ``errors`` with the reason."""
    out = []
    for f in batch:
        try:
            str(f).encode("utf-8")
        except UnicodeEncodeError:
            # Its name became lone surrogates, which neither a request nor a store takes (nor a
            # terminal prints: the bytes are shown escaped).
            errors.append((_escaped(f), "its path is not UTF-8 text: rename it"))
            continue
        if (why := ids.taken(f)) is not None:
            errors.append((str(f), why))
            continue
        try:
            out.append(read(f))
        except OSError as exc:
            errors.append((str(f), exc.strerror or str(exc)))
        except ValueError as exc:  # not a regular file, or over the size limit: not read
            errors.append((str(f), str(exc)))
    return out


class _Unsent:
    """The files a run has not sent yet, for its report should it stop (a read-only server, a full
    disk, Ctrl-C): they were neither counted nor named, and the run looked as if it had had no more.
    The files of a call that got no answer are apart: the server may have them, stored in part. So
    are, with ``--local``, the files of rows some of which were written when it stopped; a file
    finished by then (each of its documents written or failed) is neither: the report lists it
    all."""

    def __init__(self, files: Sequence[Path]) -> None:
        self._files = files
        self._next = 0  # files[:_next] were read: sent, being sent or failed
        self._batch: list[str] = []  # the sources of the batch being sent not sent yet, in order
        self._calling = 0  # how many of them, from the first, are in a call not answered yet
        self._written: set[str] = set()  # --local: the batch's sources with documents written
        self._finished: set[str] = set()  # --local: the batch's sources each of whose documents was written or failed

    def sending(self, batch: Sequence[Path], sources: Iterable[str]) -> None:
        """``batch`` was read, and ``sources`` are its documents to send (its other files failed)."""
        self._next += len(batch)
        self._batch = list(sources)
        self._calling = 0
        self._written = set()
        self._finished = set()

    def written(self, source: str) -> None:
        """A document of the batch's ``source`` was written (``--local``)."""
        self._written.add(source)

    def finished(self, source: str) -> None:
        """Each document of the batch's ``source`` was written or failed (``--local``)."""
        self._finished.add(source)

    def calling(self, count: int) -> None:
        """The next ``count`` of the batch's documents are in a call: from here the server may have them."""
        self._calling = count

    def refused(self) -> None:
        """The call was refused before any of its documents was stored: they are not sent."""
        self._calling = 0

    def sent(self, count: int) -> None:
        """The next ``count`` of the batch's documents were sent (stored or refused alone)."""
        del self._batch[:count]
        self._calling = 0
        self._written = set()
        self._finished = set()

    def unknown(self) -> list[str]:
        """The documents of the call that got no answer (a deadline, Ctrl-C, a lost connection)."""
        return self._batch[: self._calling]

    def in_part(self) -> list[str]:
        """The files of which some documents, not known to be all, were written when the run stopped (``--local``)."""
        return [s for s in self._batch if s in self._written and s not in self._finished]

    def paths(self) -> list[str]:
        # A later file's name may not be UTF-8 (surrogates): written escaped, as _readable writes it.
        return ([s for s in self._batch[self._calling :] if s not in self._written and s not in self._finished]
                + [_escaped(f) for f in self._files[self._next :]])


async def _ingest_local(settings: Settings, args: argparse.Namespace, keep: list[object]) -> int:
    from retrieval_server import model_loading

    errors: list[tuple[str, str]] = []
    if not (files := list(_files(args.paths, errors))):
        return _nothing_to_ingest(args.paths, errors)
    # Before the application's modules import, which the session's making then runs beside.
    model = model_loading.start(settings)
    from retrieval_client import file_bytes
    from retrieval_server.app import Application
    from retrieval_server.domain import Access, DocumentSource, IngestedDocument, IngestFailure
    from retrieval_server.ingest.indexer import MAX_REPORTED_ERRORS

    app = Application(settings, model=model)
    keep.append(app)
    await app.open(warm_kernels=False)
    startup_gc.settle()
    done: list[tuple[str, int, int, str]] = []
    #: each batch's failures past the MAX_REPORTED_ERRORS it lists
    not_listed: list[int] = []
    ids = _Ids(args.document_id or "")
    unsent = _Unsent(files)
    try:
        # Counts documents, not files: one .jsonl file holds many.
        with _progress(args.quiet, unit="doc") as advance, _listed_if_stopped(done, errors, unsent=unsent, errors_not_listed=not_listed):
            # A batch at a time: the files of a folder are not all held in memory at once.
            for batch in _batches(files):
                # Each with the path as given, which the report names; the source stored is the
                # path normalized, as the clients send it (docs/a.txt for ./docs/a.txt).
                read = _readable(batch, ids, errors, lambda f: (str(f), DocumentSource(
                    filename=f.name,
                    content=file_bytes(f, settings.max_document_bytes, "RETRIEVAL_MAX_DOCUMENT_BYTES"),
                    document_id=args.document_id or "",
                    source=os.path.normpath(f),
                    access=Access(args.access),
                    owner_id=args.owner or "",
                    metadata=dict(args.meta),
                    granted_user_ids=tuple(args.grant),
                )))
                shown, sources = [path for path, _ in read], [src for _, src in read]
                unsent.sending(batch, shown)
                paths = {src.filename: path for path, src in read}

                # Listed as they happen, so that a run stopped part-way (Ctrl-C) lists them: the
                # report below, in the request's order, replaces these.
                def written(place: int, d: IngestedDocument, shown: list[str] = shown) -> None:
                    done.append((d.document_id, d.parent_chunks, d.child_chunks, _outcome(d)))
                    unsent.written(shown[place])
                    advance(1)

                def failed(place: int, e: IngestFailure, paths: dict[str, str] = paths) -> None:
                    # Capped as the batch's report is: a stopped run of 3,000 failing rows listed them all.
                    if len(errors) - failures < MAX_REPORTED_ERRORS:
                        errors.extend(_at_path([(e.source, e.reason)], paths))
                    else:
                        not_listed[-1] += 1

                def finished(place: int, shown: list[str] = shown) -> None:
                    unsent.finished(shown[place])

                listed, failures = len(done), len(errors)
                not_listed.append(0)
                report = await app.ingest(sources, on_document=written, on_failure=failed, on_finished=finished)
                unsent.sent(len(sources))
                done[listed:] = [(d.document_id, d.parent_chunks, d.child_chunks, _outcome(d)) for d in report.documents]
                errors[failures:] = _at_path(((e.source, e.reason) for e in report.errors), paths)
                not_listed[-1] = report.errors_not_listed
                errors += ids.stored(shown, [d.document_id for d in report.documents])
        print("optimizing the vector index...", file=sys.stderr)
        await app.wait_for_optimize()
    finally:
        await app.close()
    return _print_ingest(done, errors, errors_not_listed=sum(not_listed))


@contextlib.contextmanager
def _progress(quiet: bool, **bar: Any) -> Iterator[Callable[[int], object]]:
    """How to advance a progress bar on stderr; a bar only when someone watches (a terminal, not
    ``--quiet``), and otherwise tqdm is not even imported (15 ms of a scripted ingest's start)."""
    if quiet or not sys.stderr.isatty():
        yield lambda _n: None
        return
    from tqdm import tqdm

    with tqdm(**bar) as shown:
        yield shown.update


def seconds(text: str) -> float:
    """A command's ``--timeout``: a number of seconds from 0 to the longest a gRPC deadline holds
    (not inf, not nan)."""
    # The client's limit: only the commands that call a server take --timeout, and they import it anyway.
    from retrieval_client import MAX_TIMEOUT_S

    value = float(text)
    if not 0 <= value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be 0 to {MAX_TIMEOUT_S:.0e} seconds (got {text})")
    return value


def top_k_option(limit: int, setting: str) -> Callable[[str], int]:
    """A command's ``--top-k``: 0 (the server's default) to ``limit``, the most a server's
    ``setting`` allows (a server set lower says so itself). Past int32 it failed after the
    connection was made, as the client's ValueError ("top_k must be an integer from -2147483648")."""

    def parse(text: str) -> int:
        try:
            value: int | None = int(text)
        except ValueError:
            value = None
        if value is None or not 0 <= value <= limit:
            raise argparse.ArgumentTypeError(f"must be 0 (the server's default) to {limit}, the most {setting} allows (got {text})")
        return value

    return parse


@contextlib.contextmanager
def _listed_if_stopped(done: list[tuple[str, int, int, str]], errors: list[tuple[str, str]], unlisted: list[int] | None = None,
                       unsent: _Unsent | None = None, errors_not_listed: list[int] | None = None) -> Iterator[None]:
    """An ingest's batches: should one stop the run, what earlier ones stored is listed before
    main says why it stopped (it was lost, and the run looked as if it had stored nothing), and
    so are the files it did not send. ``unlisted``: the counts of documents the server stored
    without listing them; ``errors_not_listed``: the counts of failures not listed."""
    try:
        yield
    except BaseException:  # Ctrl-C too
        _print_ingest(done, errors, sum(unlisted or ()), *((unsent.paths(), unsent.unknown(), unsent.in_part()) if unsent is not None else ()),
                      errors_not_listed=sum(errors_not_listed or ()))
        raise


def _outcome(d: IngestedDocument | pb.IngestedDocument) -> str:
    """What became of an ingested document (the server's IngestedDocument, or the application's):
    one found unchanged was reported "replaced", as if it had been embedded again."""
    return "unchanged" if d.unchanged else "replaced" if d.replaced else "added"


#: the exit code of an ingest that stored some documents and failed others (listed on stderr)
SOME_FAILED = 3


#: how many of the files a stopped run did not send its report names (the others are counted)
UNSENT_NAMED = 10


def _print_ingest(done: list[tuple[str, int, int, str]], errors: list[tuple[str, str]], unlisted: int = 0,
                  unsent: Sequence[str] = (), unknown: Sequence[str] = (), in_part: Sequence[str] = (), *, errors_not_listed: int = 0) -> int:
    """The report, and the exit code: 0 when every document was stored, :data:`SOME_FAILED` when
    some were, 1 when none was. ``unlisted``: documents the server stored without listing them;
    ``unsent``: the files a run that stopped did not send; ``unknown``: those it stopped sending,
    with no answer saying what the server stored of them; ``in_part``: those of rows (``--local``)
    it stopped writing, the rows written listed; ``errors_not_listed``: failures past those listed."""
    try:
        for doc_id, parents, children, outcome in done:
            print(printable(f"{outcome:9} {doc_id}  ({parents} parents, {children} children)"))
        if unlisted:
            print(f"...       {unlisted} more stored, not listed by the server")
    except BrokenPipeError:
        # Its reader stopped reading (| head): the failures and the exit code are still the run's,
        # where main's catch would have ended it with 0 and nothing on stderr.
        _discard_stdout()
    for source, reason in errors:
        print(printable(f"FAILED    {source}: {reason}"), file=sys.stderr)
    if errors_not_listed:
        print(f"...       {errors_not_listed} more errors", file=sys.stderr)
    for source in unknown[:UNSENT_NAMED]:
        print(printable(f"SENT, OUTCOME UNKNOWN {source}"), file=sys.stderr)
    if len(unknown) > UNSENT_NAMED:
        print(f"...       {len(unknown) - UNSENT_NAMED} more sent, outcome unknown", file=sys.stderr)
    for source in in_part[:UNSENT_NAMED]:
        print(printable(f"STORED IN PART {source}"), file=sys.stderr)
    if len(in_part) > UNSENT_NAMED:
        print(f"...       {len(in_part) - UNSENT_NAMED} more stored in part", file=sys.stderr)
    for source in unsent[:UNSENT_NAMED]:
        print(printable(f"NOT SENT {source}"), file=sys.stderr)
    if len(unsent) > UNSENT_NAMED:
        print(f"...       {len(unsent) - UNSENT_NAMED} more not sent", file=sys.stderr)
    stopped = ([f"{len(unknown)} files sent, outcome unknown"] if unknown else []) + ([f"{len(in_part)} files stored in part"] if in_part else []) \
        + ([f"{len(unsent)} files not sent"] if unsent else [])
    failed = len(errors) + errors_not_listed
    print(f"{len(done) + unlisted} documents indexed, {failed} failed" + (f", {', '.join(stopped)} (the run stopped)" if stopped else ""),
          file=sys.stderr)
    return 0 if not failed else SOME_FAILED if done or unlisted else 1


def _connection(args: argparse.Namespace) -> dict[str, Any]:
    """The client's identity and transport options from the command line."""
    from retrieval_client import Tls

    tls = None
    if args.tls or args.tls_ca or args.tls_cert or args.tls_key or args.tls_server_name:
        tls = Tls(ca=args.tls_ca, cert=args.tls_cert, key=args.tls_key, server_name=args.tls_server_name)
    return {"user_id": args.user, "role": args.role, "token": args.token, "tls": tls}


def _one_file_refused(exc: Any) -> bool:
    """Whether the server refused a request (a ``grpc.RpcError``) for one of its files: a field over
    its limit, a message over the size it reads. Such a batch is sent again a file at a time, so
    that only that file fails; anything else (a full disk, an unreachable server) stops the run."""
    import grpc

    code, details = exc.code(), exc.details() or ""
    return code is grpc.StatusCode.INVALID_ARGUMENT or (code is grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in details)


#: the names of the codes of an ingest the server refused before it stored any of its documents (validation,
#: the free-space floor, read-only, identity), or that the client did not send; after any other
#: (a deadline, a lost connection, a failure part-way) the server may have stored some
_REFUSED = frozenset(("INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "PERMISSION_DENIED", "UNAUTHENTICATED", "UNIMPLEMENTED"))
#: how gRPC's core begins the details of an UNAVAILABLE call that no connection took: no server
#: reachable at the address (or none that completed TLS), or no address for its name (the message of
#: older versions, then of newer ones). Such a call was not sent, where an UNAVAILABLE of a lost
#: connection may have been; a message these do not match is taken as the latter.
_NOT_CONNECTED = ("failed to connect to all addresses", "DNS resolution failed", "errors resolving ")


def _not_sent(exc: Any) -> bool:
    """Whether an ingest that failed (a ``grpc.RpcError``) reached no server, which stored none of it."""
    code = exc.code().name
    return code in _REFUSED or (code == "UNAVAILABLE" and (exc.details() or "").startswith(_NOT_CONNECTED))


#: the reason of the error, with an empty source, by which an ingest answer counts those it leaves out
_MORE_ERRORS = re.compile(r"(\d+) more errors")


def _ingest_remote(args: argparse.Namespace) -> int:
    import grpc

    from retrieval_client import RetrievalClient, document_from_file

    startup_gc.settle()  # a folder of files can take long
    errors: list[tuple[str, str]] = []
    if not (files := list(_files(args.paths, errors))):
        return _nothing_to_ingest(args.paths, errors)
    done: list[tuple[str, int, int, str]] = []
    unlisted: list[int] = []
    errors_not_listed: list[int] = []
    ids = _Ids(args.document_id or "")
    unsent = _Unsent(files)
    with RetrievalClient(args.server, **_connection(args)) as client, \
            _progress(args.quiet, total=len(files), unit="file") as advance:

        def send(read: list[tuple[str, Any]]) -> None:
            """Sends ``read``'s documents, each with the path as given, which the report names (the
            client sends the path normalized as the source)."""
            docs = [doc for _, doc in read]
            unsent.calling(len(docs))
            try:
                # Per call: the client's default timeout does not bound an ingest (a large file takes
                # minutes to embed, and one cut short is lost), only a timeout the call is given.
                resp = client.ingest(docs, timeout=args.timeout)
            except grpc.RpcError as exc:
                if _not_sent(exc):
                    unsent.refused()
                raise
            done.extend((d.document_id, d.parent_chunks, d.child_chunks, _outcome(d)) for d in resp.documents)
            listed: list[tuple[str, str]] = []
            for e in resp.errors:
                # Counted, not listed: as one failure, 3,000 failed rows were summed up as 1,001.
                if not e.source and (more := _MORE_ERRORS.fullmatch(e.reason)):
                    errors_not_listed.append(int(more[1]))
                else:
                    listed.append((e.source, e.reason))
            errors.extend(_at_path(listed, {doc.filename: path for path, doc in read}))
            errors.extend(ids.stored([path for path, _ in read], [d.document_id for d in resp.documents]))
            unlisted.append(resp.documents_not_listed)
            unsent.sent(len(docs))

        with _listed_if_stopped(done, errors, unlisted, unsent, errors_not_listed):
            for batch in _batches(files):
                read = _readable(batch, ids, errors, lambda f: (str(f), document_from_file(
                    f, document_id=args.document_id or "", access=args.access, owner_id=args.owner or "",
                    granted_user_ids=args.grant, metadata=dict(args.meta),
                )))
                unsent.sending(batch, (path for path, _ in read))
                try:
                    if read:
                        send(read)
                except grpc.RpcError as exc:
                    if not _one_file_refused(exc):
                        raise
                    for path, doc in read:
                        try:
                            send([(path, doc)])
                        except grpc.RpcError as alone:
                            if not _one_file_refused(alone):
                                raise
                            errors.append((path, f"{alone.code().name}: {alone.details()}"))  # type: ignore[attr-defined]
                            unsent.sent(1)
                advance(len(batch))
    return _print_ingest(done, errors, sum(unlisted), errors_not_listed=sum(errors_not_listed))


def _print_query(resp: object, as_json: bool) -> None:
    from retrieval_client import to_json

    if as_json:
        print(to_json(resp))  # type: ignore[arg-type]
        return
    # Each line holds a document's text, which must not reach a terminal as control sequences.
    contexts = getattr(resp, "contexts", None)
    if contexts is not None:
        m = resp.metrics  # type: ignore[attr-defined]
        stages = ", ".join(f"{s.stage} {s.duration_ms:.1f}ms" for s in m.stages)
        print(printable(f"{len(contexts)} contexts in {m.total_ms:.1f} ms ({stages})" + (f"; degraded: {', '.join(m.degraded)}" if m.degraded else "")))
        for i, c in enumerate(contexts, 1):
            page = f", page {c.metadata.page}" if c.metadata.page else ""
            print(printable(f"\n[{i}] {c.score:.3f}  {c.metadata.title or c.document_id} ({c.parent_chunk_id}{page})"))
            print(printable("    " + " ".join(c.content.split())[:300]))
            for child in c.child_chunks[:2]:
                print(printable(f"    > {child.score:.3f} {' '.join(child.content.split())[:160]}"))
        if not contexts and resp.suggestions:  # type: ignore[attr-defined]
            # What an empty answer offers instead (related titles, hints): only --json showed it.
            print(printable(f"suggestions: {'; '.join(resp.suggestions)}"))  # type: ignore[attr-defined]
    else:
        for i, r in enumerate(resp.results, 1):  # type: ignore[attr-defined]
            print(printable(f"[{i}] {r.score:.3f}  {r.title} ({r.document_id} #{r.chunk_index}): {' '.join(r.text.split())[:200]}"))
        if resp.results_not_listed:  # type: ignore[attr-defined]
            print(f"{resp.results_not_listed} more results not listed: the answer holds at most RETRIEVAL_MAX_RESPONSE_BYTES")  # type: ignore[attr-defined]


def _remote(args: argparse.Namespace) -> int:
    from retrieval_client import RetrievalClient

    timeout = 60.0 if args.timeout is None else args.timeout
    with RetrievalClient(args.server, timeout=timeout, **_connection(args)) as client:
        if args.command == "query":
            _print_query(client.query(args.text, top_k=args.top_k, strategy=args.strategy), args.json)
        elif args.command == "search":
            _print_query(client.search(args.text, top_k=args.top_k), args.json)
        elif args.command == "delete":
            resp = client.delete(args.document_ids, timeout=timeout)  # the client's default does not bound a delete
            if args.json:  # ids may hold ", " or be "-": the text below is for reading, not parsing
                from retrieval_client import to_json

                print(to_json(resp))
            else:
                print(printable(f"deleted: {', '.join(resp.deleted) or '-'}; not found: {', '.join(resp.not_found) or '-'}"))
        elif args.command == "health":
            from retrieval_client import to_json

            resp = client.health()
            print(to_json(resp))
            return 0 if resp.status in (1, 2) else 1  # SERVING or DEGRADED
    return 0


#: the columns ``ask`` lays its trace out to in a pipe or a file: rich knows no unlimited width, and
#: no line of a trace (a router's reason, a tool's arguments) comes near this one
UNWRAPPED_WIDTH = 1_000_000


def _ask(args: argparse.Namespace) -> int:
    from retrieval_client import to_json
    from retrieval_server.ask import AnswerConsole, AskOptions, AskSession, interactive

    startup_gc.settle()  # a conversation can go on
    console, errors = AnswerConsole(highlight=False), AnswerConsole(highlight=False, stderr=True)
    for shown in (console, errors):
        if not shown.is_terminal:
            # A pipe or a file gets each line whole: wrapped at rich's 80 columns, it got newlines and
            # trailing spaces of its own in the middle of an answer. soft_wrap covers what is printed as
            # text; the trace's tree is laid out to the console's width, and its lines were cut there.
            shown.soft_wrap = True
            shown.width = UNWRAPPED_WIDTH
    connection = _connection(args)
    session = AskSession(
        AskOptions(args.server, args.user, args.role, args.strategy, args.top_k, args.trace, connection["token"], connection["tls"],
                   60.0 if args.timeout is None else args.timeout),
        console, errors=errors,
    )
    try:
        if args.question is None:
            return interactive(session, console, Path(args.history).expanduser())
        if args.json:
            session.options.trace = False
            console.quiet = True
            resp = session.ask(args.question)
            console.quiet = False
            print(to_json(resp) if resp is not None else "{}")
            return 0 if resp is not None else 1  # as without --json: no answer is a failure
        return 0 if session.ask(args.question) is not None else 1
    finally:
        session.close()


async def _export_graph(settings: Settings, args: argparse.Namespace) -> int:
    import networkx as nx

    from retrieval_server.app import metadata_store_for
    from retrieval_server.backends.executor import BlockingExecutor
    from retrieval_server.domain import AccessFilter, Identity, Role
    from retrieval_server.workflow.knowledge_graph import KnowledgeGraph

    # As a server reads the headers --user and --role send: a role alone is an anonymous caller's,
    # who reads the public documents only (SUPER_ADMIN: all). It was ignored, and all exported.
    identity = (Identity("cli", Role.SUPER_ADMIN) if args.user is None and args.role is None
                else Identity(args.user, Role(args.role or "USER")))

    # An export only reads: read-only, so it can run beside a serving process.
    store = metadata_store_for(settings.model_copy(update={"read_only": True}))
    executor = BlockingExecutor(1)
    await store.open()
    startup_gc.settle()
    try:
        graph = await KnowledgeGraph(store, executor).to_networkx(AccessFilter.for_identity(identity))
    finally:
        await store.close()
        executor.shutdown()
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    nx.write_graphml(graph, out)
    print(f"wrote {out}: {graph.number_of_nodes()} entities, {graph.number_of_edges()} relations", file=sys.stderr)
    return 0


def _quantize(source: Path, target: Path) -> int:
    import shutil

    if not (source / "model.onnx").is_file():
        print(f"error: {source} has no model.onnx", file=sys.stderr)
        return 1
    if target.resolve() == source.resolve() or (target.exists() and target.samefile(source)):
        # The fp32 model was overwritten with its int8 copy, then the tokenizer's copy onto itself failed.
        print(f"error: TARGET {target} is SOURCE {source}: the int8 model goes to another folder", file=sys.stderr)
        return 1
    from scoring_core.quantize import quantize_int8

    startup_gc.settle()  # the quantizer's graph of a large model is many objects
    quantize_int8(source / "model.onnx", target / "model.onnx")
    for extra in ("tokenizer.json", "config.json"):
        if (source / extra).is_file():
            shutil.copyfile(source / extra, target / extra)
    print(f"wrote {target / 'model.onnx'}; use it with RETRIEVAL_MODEL_DIR={target}")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="retrieval-server", description="Retrieval service for RAG (gRPC).")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="run the gRPC server (settings from RETRIEVAL_* variables)")

    def client_opts(sp: argparse.ArgumentParser, default_role: str | None = None) -> None:
        # An empty RETRIEVAL_SERVER (a template rendered without it) is unset, as an empty setting is.
        sp.add_argument("--server", default=os.environ.get("RETRIEVAL_SERVER") or "localhost:50051",
                        help="address of a running server (default: $RETRIEVAL_SERVER, else localhost:50051)")
        sp.add_argument("--user", default=None, type=user_id_header, help="caller's user id (x-user-id: servers in auth mode none, or behind a gateway)")
        sp.add_argument("--role", default=default_role, type=role, choices=ROLE_CHOICES, help="caller's role (x-user-role; any case)")
        sp.add_argument("--token", default=os.environ.get("RETRIEVAL_TOKEN"), help="bearer token (JWT) for auth mode jwt (default: $RETRIEVAL_TOKEN)")
        sp.add_argument("--tls", action="store_true", help="connect with TLS (implied by the options below)")
        sp.add_argument("--tls-ca", help="PEM CA bundle that signed the server's certificate (default: the system's roots)")
        sp.add_argument("--tls-cert", help="client certificate (PEM) for mutual TLS")
        sp.add_argument("--tls-key", help="the client certificate's private key (PEM)")
        sp.add_argument("--tls-server-name", help="name to check in the server's certificate (when --server is an IP address)")
        sp.add_argument("--timeout", type=seconds, default=None,
                        help="seconds each call may take, 0 for no limit (default: 60; ingest: no limit)")

    ing = sub.add_parser("ingest", help="index files or folders (.txt .md .html .pdf .jsonl)")
    ing.add_argument("paths", nargs="+")
    ing.add_argument("--access", choices=ACCESS_CHOICES, default=None, help="who reads the documents (default: public; required with --owner)")
    ing.add_argument("--owner", type=utf8_text, help="the documents' owner (needs --access)")
    ing.add_argument("--grant", action="append", default=[], type=utf8_text, help="user granted read access (repeatable)")
    ing.add_argument("--meta", action="append", default=[], type=key_value, help="metadata key=value (repeatable)")
    ing.add_argument("--document-id", type=utf8_text, help="id for a single file (default: file name without extension)")
    ing.add_argument("--quiet", action="store_true", help="no progress bar")
    ing.add_argument("--local", action="store_true", help="write to RETRIEVAL_DATA_DIR directly, without a server")
    # The operator's command: an ADMIN replaces or deletes only what it may read, and sends no user.
    client_opts(ing, default_role="SUPER_ADMIN")

    for name, top_k_limit, top_k_setting in (("query", TOP_K_LIMIT, "RETRIEVAL_TOP_K_MAX"),
                                             ("search", SEARCH_TOP_K_LIMIT, "RETRIEVAL_SEARCH_TOP_K_MAX")):
        sp = sub.add_parser(name, help=f"{name} a running server")
        sp.add_argument("text", type=utf8_text)
        sp.add_argument("--top-k", type=top_k_option(top_k_limit, top_k_setting), default=0)
        sp.add_argument("--json", action="store_true")
        if name == "query":
            sp.add_argument("--strategy", default="semantic", choices=STRATEGY_CHOICES)
        client_opts(sp)

    ask = sub.add_parser("ask", help="ask a running server; answers with citations (no question: interactive)")
    ask.add_argument("question", nargs="?", type=utf8_text, help="one question; without it, an interactive session")
    ask.add_argument("--strategy", default="hybrid", choices=["semantic", "keyword", "hybrid", "adaptive", "graph"])
    ask.add_argument("--top-k", type=top_k_option(TOP_K_LIMIT, "RETRIEVAL_TOP_K_MAX"), default=5)
    ask.add_argument("--trace", action="store_true", help="print the execution trace (stages, router, tools, graph hops)")
    ask.add_argument("--json", action="store_true", help="print the final response as JSON")
    ask.add_argument("--history", default="~/.retrieval-server-ask-history", help="interactive history file")
    client_opts(ask)

    gr = sub.add_parser("graph", help="the knowledge graph in RETRIEVAL_DATA_DIR (or RETRIEVAL_MYSQL_DSN)")
    gsub = gr.add_subparsers(dest="graph_command", required=True)
    ex = gsub.add_parser("export", help="write the graph as GraphML (networkx) for inspection")
    ex.add_argument("output", help="file to write, e.g. graph.graphml")
    ex.add_argument("--user", help="export only what this user may read (default: everything)")
    ex.add_argument("--role", type=role, choices=ROLE_CHOICES,
                    help="the caller's role (default: USER with --user); without --user, an anonymous caller's: the public documents, all for SUPER_ADMIN")

    de = sub.add_parser("delete", help="delete documents")
    de.add_argument("document_ids", nargs="+", type=utf8_text)
    de.add_argument("--json", action="store_true", help="print the response as JSON (deleted, not_found)")
    client_opts(de, default_role="SUPER_ADMIN")
    client_opts(sub.add_parser("health", help="component health of a running server"))
    sc = sub.add_parser("sample-corpus", help="write the demo corpus (public and private documents)")
    sc.add_argument("directory")
    qz = sub.add_parser("quantize", help="write an int8 copy of an ONNX model folder (for RETRIEVAL_MODEL_DIR)")
    qz.add_argument("source", help="folder with model.onnx (+ tokenizer.json)")
    qz.add_argument("target", help="folder to write")
    return p


def _run_service(settings: Settings, args: argparse.Namespace, keep: list[object]) -> int:
    import asyncio

    if args.command == "serve":
        if settings.processes > 1:
            from retrieval_server.supervisor import supervise

            startup_gc.settle()  # the supervisor only waits on its workers from here
            return supervise(settings)
        from retrieval_server import event_loop
        from retrieval_server.server import serve

        event_loop.run(serve(settings, on_ready=startup_gc.settle), settings.event_loop)
        return 0
    if args.command == "graph":
        return asyncio.run(_export_graph(settings, args))
    return asyncio.run(_ingest_local(settings, args, keep))


def main(argv: Sequence[str] | None = None, keep: list[object] | None = None) -> int:
    """Run one command. ``keep`` receives what the command closed but did not free (an application
    and its model session): the caller frees it, or exits without freeing it (:func:`run`)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "ingest" and args.document_id is not None:
        # Refused before anything is sent: the second file failed as another's id, after the
        # first was stored, with advice (rename the files) that did not apply.
        files = list(_files(args.paths, []))
        named = sum(1 for f in files if f.suffix.lower() != ".jsonl")
        if named > 1:
            parser.error(f"--document-id names one file; {named} were given")
        if not named and (rows := next((f for f in files if f.suffix.lower() == ".jsonl"), None)) is not None:
            # Taken without a word, and every row stored under its own id.
            parser.error(f"--document-id applies to a file that is not JSONL: each row of {printable(str(rows))} has its own id (_id)")
    if args.command == "ingest" and args.grant and args.access != "private":
        # A public document is read by every caller: the grant changed nothing, without a word.
        parser.error("--grant needs --access private (a public document is read by everyone)")
    if args.command == "ingest" and args.access == "private" and not (args.owner or "").strip():
        # Every file was sent, to be refused one by one as a PRIVATE document without owner_id.
        parser.error("--access private needs --owner (the user who owns the documents: a private document is read by its owner and grantees)")
    if args.command == "ingest" and args.access is None:
        if args.owner is not None:
            # Taken as public, an owner's private document sent again without its access was
            # published: the server refuses an owner_id with access unset for the same reason.
            parser.error("--owner needs --access private or --access public (without it, an owner's private document sent again would be published)")
        args.access = "public"
    calls = getattr(args, "server", None) is not None and not (args.command == "ingest" and args.local)
    if calls and not args.server.strip():
        # gRPC's own refusal was four lines of its C core and "Failed to create channel to ''".
        parser.error("--server must name a server (HOST:PORT); it is empty")
    if calls and (port := _port_out_of_range(args.server)) is not None:
        # gRPC took it modulo 65536: 127.0.0.1:112847 connected to port 47311.
        parser.error(f"--server's port must be 1 to 65535 (got {port} in '{args.server}')")
    if calls and args.token and args.token.strip():
        from retrieval_client.targets import is_loopback

        # The client's own refusal read as a failed query, with advice for its Python API.
        tls = args.tls or args.tls_ca or args.tls_cert or args.tls_key or args.tls_server_name
        if not tls and not is_loopback(args.server):
            parser.error("--token needs --tls (or a loopback --server): a bearer token ($RETRIEVAL_TOKEN too) travels only over TLS")
        if not _printable_ascii(args.token.strip()):
            # The client's refusal spoke of a user id, and exited 1.
            parser.error("--token ($RETRIEVAL_TOKEN too) must be printable ASCII, as a JWT and the authorization header carrying it are")
    for flag, pem in (("--tls-ca", getattr(args, "tls_ca", None)), ("--tls-cert", getattr(args, "tls_cert", None))):
        if pem and not (args.command == "ingest" and args.local):
            from retrieval_client.tls_files import pem_certificates

            try:
                pem_certificates(pem, flag)
            except ValueError as exc:  # gRPC's own refusal was lines of its C core, then UNAVAILABLE naming no file
                parser.error(str(exc))
            except OSError:
                pass  # the command reports it, as any file it cannot read
    if calls and bool(args.tls_cert) != bool(args.tls_key):
        # The client's refusal was a ValueError, exit 1, when the channel was made.
        parser.error("--tls-cert and --tls-key go together: a client certificate needs its key, and a key its certificate")
    if calls and args.tls_cert and args.tls_key:
        from retrieval_client.tls_files import check_key_pair, pem_key

        try:
            # The client's refusal, exit 1 as "search failed: ValueError: Tls.key ...", named its Python field.
            pem_key(args.tls_key, "--tls-key")
            check_key_pair(args.tls_cert, "--tls-cert", args.tls_key, "--tls-key")
        except ValueError as exc:
            parser.error(str(exc))
        except OSError:
            pass  # the command reports it, as any file it cannot read
    if args.command == "graph" and args.user is not None:
        from retrieval_server.identifiers import clean_user_id

        try:
            # An empty --user (an unset variable in a script) is refused as a user id, not read as no
            # user: it exported every user's private graph.
            args.user = clean_user_id(args.user, "--user")
        except ValueError as exc:
            parser.error(str(exc))
    settings = None
    if args.command in _SERVICE_COMMANDS or (args.command == "ingest" and args.local):
        from retrieval_server.config import ConfigError, load_settings
        from retrieval_server.observability.logging import configure

        try:
            settings = load_settings()
        except ConfigError as exc:
            print(exc, file=sys.stderr)
            return 2
        configure(settings.log_level, settings.log_format)
    try:
        if settings is not None:
            return _run_service(settings, args, [] if keep is None else keep)
        if args.command == "sample-corpus":
            from retrieval_server.sample_corpus import write_sample_corpus

            for path in write_sample_corpus(Path(args.directory)):
                print(path)
            return 0
        if args.command == "quantize":
            return _quantize(Path(args.source), Path(args.target))
        if args.command == "ask":
            return _ask(args)
        if args.command == "ingest":
            return _ingest_remote(args)
        return _remote(args)
    except KeyboardInterrupt:
        # Ctrl-C: what an ingest stored is listed (see _listed_if_stopped), then one line, as a stop.
        print(f"error: {args.command} interrupted", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader of stdout stopped reading (| head, grep -q): it has what it wanted, which is
        # no failure of the command. The commands write to no other pipe (a server's failures are
        # RpcErrors). An ingest, whose failures come after its listing, catches it itself
        # (_print_ingest), so that they are not taken for a success here.
        _discard_stdout()
        return 0
    except Exception as exc:
        if isinstance(exc, OSError) or _is_service_error(exc):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        import grpc

        if isinstance(exc, grpc.RpcError):
            print(f"error: {exc.code().name}: {printable(str(exc.details()))}", file=sys.stderr)  # type: ignore[attr-defined]
            return 1
        # One line for the operator; the traceback goes to the log at DEBUG.
        log.debug("command failed", exc_info=True)
        print(f"error: {args.command} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def _discard_stdout() -> None:
    """Send what stdout still holds to /dev/null: its reader has gone, and the flush at exit would
    otherwise fail on the closed pipe again, reported by the interpreter (the Python
    documentation's pattern for SIGPIPE)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def run() -> NoReturn:
    """The console script: :func:`main`, then exit without the interpreter's teardown.

    A command has closed everything it opened when ``main`` returns, and the teardown that
    remains only frees the objects of some 600 modules one by one: 60-90 ms after ``ingest
    --local``, longer than writing its two documents, and a wait for nothing after every
    one-shot command (Instagram skips it for the same reason). That includes what the command
    hands back to be freed (``keep``): the application of ``ingest --local`` and its model
    session, whose memory took about 20 ms to give back. ``serve`` keeps the usual exit,
    so that anything its worker processes or the server registered to run at exit still runs;
    so does a process under a profiler or a tracer (cProfile, coverage), which writes its data
    at exit.
    """
    argv = sys.argv[1:]
    if argv[:1] == ["serve"]:
        early_stop.catch()  # before anything slow: see early_stop
    # Each command settles once started; those that never do (one RPC, writing the sample corpus)
    # end soon after their imports.
    startup_gc.defer_collection()
    keep: list[object] = []
    code = main(argv, keep)
    if argv[:1] == ["serve"] or sys.getprofile() is not None or sys.gettrace() is not None:
        sys.exit(code)
    logging.shutdown()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # None when the process was started with it closed
                try:
                    stream.flush()
                except BrokenPipeError:
                    if stream is not sys.stdout:
                        raise
                    _discard_stdout()  # as in main: output nobody reads any more is no error
    except (OSError, ValueError):
        sys.exit(code)  # let the interpreter report it as it always does
    os._exit(code)


if __name__ == "__main__":
    run()
