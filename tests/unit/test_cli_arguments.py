"""The CLI's arguments and errors, spelled out so that client commands need not import the domain, agree with it."""

from __future__ import annotations

import argparse

import pytest

from retrieval_server import cli
from retrieval_server.domain import Access, NotFound, Strategy


def test_the_access_and_strategy_choices_are_the_domains_values() -> None:
    assert sorted(cli.ACCESS_CHOICES) == sorted(a.value for a in Access)
    assert sorted(cli.STRATEGY_CHOICES) == sorted(s.value for s in Strategy)


@pytest.mark.parametrize(("error", "line"), [
    (NotFound("no such document: x"), "error: no such document: x"),  # a ServiceError: its message alone
    (KeyError("field"), "error: health failed: KeyError: 'field'"),  # anything else: the command named
])
def test_a_failed_command_prints_one_line_and_exits_with_1(
    error: Exception, line: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    def failing(args: argparse.Namespace) -> int:
        raise error

    monkeypatch.setattr(cli, "_remote", failing)
    assert cli.main(["health"]) == 1
    assert capsys.readouterr().err == line + "\n"
