"""The CLI's arguments and errors, spelled out so that client commands need not import the domain, agree with it."""

from __future__ import annotations

import argparse

import pytest

from retrieval_server import cli
from retrieval_server.domain import Access, NotFound, Strategy


def test_the_access_and_strategy_choices_are_the_domains_values() -> None:
    assert sorted(cli.ACCESS_CHOICES) == sorted(a.value for a in Access)
    assert sorted(cli.STRATEGY_CHOICES) == sorted(s.value for s in Strategy)


def test_a_service_error_is_one_line_and_exit_code_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def missing(args: argparse.Namespace) -> int:
        raise NotFound("no such document: x")

    monkeypatch.setattr(cli, "_remote", missing)
    assert cli.main(["health"]) == 1
    assert capsys.readouterr().err == "error: no such document: x\n"


def test_any_other_failure_names_the_command(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def broken(args: argparse.Namespace) -> int:
        raise KeyError("field")

    monkeypatch.setattr(cli, "_remote", broken)
    assert cli.main(["health"]) == 1
    assert capsys.readouterr().err == "error: health failed: KeyError: 'field'\n"
