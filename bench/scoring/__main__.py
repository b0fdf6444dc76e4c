"""python -m bench.scoring [--quick] [--out FILE]: every scoring_core benchmark in one run.

Prints markdown tables (ratios against baselines measured in the same run), checks the targets,
and writes everything to JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TypeVar

from bench.provenance import provenance

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def _default_model_dir() -> Path | None:
    shared = Path(os.environ.get("RETRIEVAL_SHARED_DIR", REPO.parent / "shared"))
    d = shared / "models" / "all-MiniLM-L6-v2"
    return d if (d / "model.onnx").is_file() else None


def _fmt(x: float | None, digits: int = 3) -> str:
    return "–" if x is None else f"{x:.{digits}g}" if x < 100 else f"{x:,.0f}"


def _table(heading: str, columns: str, rows: Iterable[T], cells: Callable[[T], list[str]], left: int = 0) -> list[T]:
    """Print a markdown table row by row as ``rows`` are measured (the first ``left`` columns
    aligned left, numbers right); return the rows."""
    print(heading + "\n")
    print(columns)
    print("| " + " | ".join("---" if i < left else "---:" for i in range(columns.count("|") - 1)) + " |")
    kept = []
    for row in rows:
        kept.append(row)
        print("| " + " | ".join(cells(row)) + " |", flush=True)
    return kept


def main() -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scoring", description=__doc__)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "scoring.json")
    ap.add_argument("--model-dir", type=Path, default=_default_model_dir(), help="fp32 all-MiniLM-L6-v2 folder")
    ap.add_argument("--threads", type=int, default=2, help="onnxruntime/torch threads")
    ap.add_argument("--quick", action="store_true", help="smaller sweep (cache up to 100k, batch 1 and 32)")
    ap.add_argument("--skip-encoders", action="store_true")
    args = ap.parse_args()

    from bench.scoring.encoders import onnx_rows, prepare_models, torch_rows
    from bench.scoring.kernels import cache_cases, kernel_cases
    from bench.scoring.names import name_cases
    from retrieval_server.backends.embedder import BUNDLED_TOKENIZER

    started = time.time()
    out: dict[str, object] = {
        **provenance(),
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(), "python": platform.python_version()},
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
    }
    kernels = _table("## Kernels (ms per call, best of several batches; ratios = baseline time / numba time)",
                     "| kernel | size | numba ms | numpy ms | python ms | × vs numpy | × vs python |", kernel_cases(),
                     lambda r: [r.kernel, r.size, _fmt(r.numba_ms), _fmt(r.numpy_ms), _fmt(r.python_ms), _fmt(r.vs_numpy), _fmt(r.vs_python)], left=2)
    out["kernels"] = [asdict(r) | {"vs_numpy": r.vs_numpy, "vs_python": r.vs_python} for r in kernels]

    caches = _table("\n## Cache matcher, 384 dims (numpy = matmul + mask + argmax with BLAS on the same threads;\n"
                    "stream = the same bytes summed on the same threads, no other work)",
                    "| entries | threads | MB | numba ms | numpy ms | python ms | GB/s | stream GB/s | fraction of stream | × vs numpy |",
                    cache_cases((10_000, 100_000) if args.quick else (10_000, 100_000, 1_000_000)),
                    lambda c: [f"{c.entries:,}", str(c.threads), f"{c.mbytes:,.0f}", _fmt(c.numba_ms), _fmt(c.numpy_ms), _fmt(c.python_ms),
                               f"{c.gbps:.1f}", f"{c.stream_gbps:.1f}", f"{c.bandwidth_fraction:.0%}", f"{c.numpy_ms / c.numba_ms:.2f}"])
    out["cache"] = [asdict(c) | {"fraction_of_stream": c.bandwidth_fraction, "gbps": c.gbps} for c in caches]

    names = _table("\n## Fuzzy name look-ups (ms for 20 n-grams against the names; ratio = every name scored / filtered)",
                   "| names | NameFilter + rapidfuzz ms | rapidfuzz on every name ms | filter in plain Python ms | × vs every name |",
                   name_cases((1_000, 15_000) if args.quick else (1_000, 15_000, 100_000)),
                   lambda n: [f"{n.names:,}", _fmt(n.filtered_ms), _fmt(n.all_names_ms), _fmt(n.python_filter_ms), _fmt(n.vs_all_names)])
    out["names"] = [asdict(n) | {"vs_all_names": n.vs_all_names} for n in names]

    encoders = []
    if args.skip_encoders or args.model_dir is None:
        print("\n(encoders skipped: " + ("--skip-encoders" if args.skip_encoders else "no fp32 model; pass --model-dir") + ")")
    else:
        lengths = (32, 128, 256)
        batches = (1, 32) if args.quick else (1, 8, 32, 64)
        print(f"\n## Encoders ({args.threads} threads; texts/s or pairs/s)\n")
        print("| model | runtime | tokens | batch | per second |")
        print("| --- | --- | ---: | ---: | ---: |")
        with tempfile.TemporaryDirectory() as work:
            models = prepare_models(args.model_dir, Path(work))
            rows = list(onnx_rows(models, BUNDLED_TOKENIZER, args.threads, lengths, batches))
            rows += list(torch_rows(args.threads, lengths, 32))
        for r in rows:
            encoders.append(r)
            print(f"| {r.model} | {r.runtime} | {r.tokens} | {r.batch} | {r.per_s:,.1f} |")
        if not any("torch" in r.runtime for r in rows):
            print("\n(sentence-transformers baseline skipped: pip install -e '.[bench-torch]')")
    out["encoders"] = [asdict(r) for r in encoders]

    targets = _targets(kernels, caches, encoders)
    print("\n## Targets\n")
    for name, value, goal, ok in targets:
        print(f"- {'PASS' if ok else 'MISS'} {name}: {value} (target {goal})")
    out["targets"] = [{"name": n, "value": v, "target": g, "met": ok} for n, v, g, ok in targets]
    out["seconds"] = round(time.time() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2))
    print(f"\nwrote {args.out} in {out['seconds']} s")
    return 0


def _targets(kernels, caches, encoders) -> list[tuple[str, str, str, bool]]:  # type: ignore[no-untyped-def]
    t = []
    for kernel, size in (("rrf", "4x1,000"), ("rrf[top 50]", "4x1,000"), ("group_by_parent", "10,000 children")):
        row = next(r for r in kernels if r.kernel == kernel and r.size == size)
        t.append((f"{kernel} {size} vs plain Python", f"{row.vs_python:.1f}×", "≥ 20×", row.vs_python >= 20))
    for c in (c for c in caches if c.entries == 100_000):
        label = f"cache match 100k×384, {c.threads} thread{'s' if c.threads > 1 else ''}"
        t.append((f"{label}: fraction of streaming bandwidth", f"{c.bandwidth_fraction:.0%}", "≥ 70%", c.bandwidth_fraction >= 0.7))
        t.append((f"{label}: vs numpy matmul+argmax", f"{c.numpy_ms / c.numba_ms:.2f}×", "> 1×", c.numpy_ms > c.numba_ms))

    def rate(model: str, runtime: str, tokens: int, batch: int = 32) -> float | None:
        return next((r.per_s for r in encoders if r.model == model and r.runtime == runtime and r.tokens == tokens and r.batch == batch), None)

    for model in ("bi-encoder", "cross-encoder"):
        f32, i8 = rate(model, "onnx fp32", 128), rate(model, "onnx int8", 128)
        if f32 and i8:
            t.append((f"{model} int8 vs fp32 (128 tokens, batch 32)", f"{i8 / f32:.2f}×", "≥ 1.8×", i8 / f32 >= 1.8))
    st, onnx = rate("cross-encoder", "sentence-transformers (torch)", 128), rate("cross-encoder", "onnx fp32", 128)
    if st and onnx:
        t.append(("ONNX cross-encoder vs sentence-transformers CrossEncoder (128 tokens)", f"{onnx / st:.2f}×", "≥ 1.5×", onnx / st >= 1.5))
    return t


if __name__ == "__main__":
    sys.exit(main())
