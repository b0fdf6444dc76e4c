"""Generate the Python gRPC stubs from protos/ into clients/python/.

Run after editing a .proto:  python protos/generate.py
tests/unit/test_stubs_current.py regenerates into a temporary directory and fails when the
committed stubs differ, so a stale stub can't land.
"""

from __future__ import annotations

import sys
from pathlib import Path

PROTO_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parent
DEFAULT_OUT = REPO_ROOT / "clients" / "python"
PROTO_FILES = ("retrieval/v1/retrieval.proto", "retrieval/v1/events.proto")


def generate(out_dir: Path = DEFAULT_OUT) -> list[Path]:
    """Run protoc (grpcio-tools) and return the files it wrote, relative to ``out_dir``."""
    import grpc_tools
    from grpc_tools import protoc

    out_dir.mkdir(parents=True, exist_ok=True)
    well_known = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *PROTO_FILES,
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed: {' '.join(args)}")
    written = []
    for proto in PROTO_FILES:
        stem = Path(proto).with_suffix("")
        for suffix in ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py"):
            written.append(stem.parent / f"{stem.name}{suffix}")
    # Packages, so the stubs import as retrieval.v1.retrieval_pb2.
    for pkg in {p.parent for p in written} | {p.parent.parent for p in written}:
        if str(pkg) != ".":
            init = out_dir / pkg / "__init__.py"
            init.touch()
            written.append(pkg / "__init__.py")
    return sorted(set(written))


if __name__ == "__main__":
    for path in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT):
        print(path)
