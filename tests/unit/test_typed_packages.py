"""Every Python package the project ships says it is typed (PEP 561): without py.typed, a
consumer's type checker ignored the client's hints and the stubs' .pyi, and read every name as Any."""

from __future__ import annotations

import tomllib

from tests.support.paths import REPO


def test_every_shipped_package_has_py_typed_in_its_package_data() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {pattern.removesuffix("*") for pattern in setuptools["packages"]["find"]["include"]}
    assert packages == {"retrieval_server", "scoring_core", "retrieval", "retrieval_client"}
    for package in packages:
        folder = REPO / setuptools["package-dir"].get(package, package)
        assert (folder / "py.typed").is_file(), f"{folder} has no py.typed"
        assert "py.typed" in setuptools["package-data"].get(package, []), f"{package}'s package-data leaves py.typed out"
