"""The int8/fp32 timings of this machine, kept so that each new index need not time both models again.

Timing both builds costs several seconds of model runs (two session loads, twelve rounds), which a
new index paid every time: the first ``ingest --local`` of two small files spent more time timing
models than embedding. The answer depends on the CPU, the cores the process may use, the intra-op
thread setting, the onnxruntime build and the two model files, so the timings are kept under a key
made of exactly those, in a JSON file beside the fp32 build (``RETRIEVAL_MODEL_CACHE_DIR``). A new
index on the same machine reuses them; anything in the key that changes measures again. Deleting
the file measures again too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import onnxruntime

from scoring_core.model_builder import write_atomically

log = logging.getLogger(__name__)

FILE_NAME = "model-timings.json"


def _cpu() -> dict[str, str]:
    """The CPU model and a digest of its feature flags (VNNI and AVX-512 decide int8's speed)."""
    found: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "flags", "Features"):  # Features: the flags on ARM
                    found.setdefault("flags" if key == "Features" else key, value.strip())
                if len(found) == 2:
                    break
    except OSError:
        pass
    flags = " ".join(sorted(found.get("flags", "").split()))
    return {
        "cpu": found.get("model name") or platform.processor() or platform.machine(),
        "cpu_flags": hashlib.sha256(flags.encode()).hexdigest()[:16],
    }


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def fingerprint(*, threads: int | None, models: Mapping[str, str]) -> dict[str, str]:
    """What the timings depend on. ``models``: each build's model id, by precision."""
    return {
        **_cpu(),
        "usable_cores": str(usable_cores()),
        "intra_op_threads": "default" if threads is None else str(threads),
        "onnxruntime": onnxruntime.__version__,
        **{f"model_{precision}": model_id for precision, model_id in sorted(models.items())},
    }


@dataclass(frozen=True, slots=True)
class MachineTimings:
    """The timings file of a cache folder, read and written under one machine fingerprint."""

    path: Path
    machine: dict[str, str]

    @property
    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.machine, sort_keys=True).encode()).hexdigest()[:24]

    def _entries(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("ignoring the model timings file %s: %s", self.path, exc)
            return {}
        entries = data.get("entries") if isinstance(data, dict) else None
        return entries if isinstance(entries, dict) else {}

    def get(self) -> dict[str, object] | None:
        """The timings measured before under this fingerprint, or None."""
        entry = self._entries().get(self.key)
        timings = entry.get("timings") if isinstance(entry, dict) else None
        return timings if isinstance(timings, dict) else None

    def put(self, timings: Mapping[str, object]) -> None:
        """Keep ``timings`` for this fingerprint. Written to a temporary name and renamed, so a
        reader never sees half a file; a folder that cannot be written only costs the next index a
        measurement, so the error is logged, not raised."""
        entries = self._entries()
        entries[self.key] = {"machine": self.machine, "timings": dict(timings), "measured_at": datetime.now(UTC).isoformat(timespec="seconds")}
        try:
            write_atomically(self.path, json.dumps({"entries": entries}, indent=1, sort_keys=True).encode())
        except OSError as exc:
            log.warning("could not keep the model timings in %s: %s", self.path, exc)
