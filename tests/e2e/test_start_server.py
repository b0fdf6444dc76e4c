"""A setting of the query workflow that cannot work is refused before anything is opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_server.app import Application
from retrieval_server.config import load_settings
from retrieval_server.server import start_server


async def test_a_workflow_that_cannot_be_built_is_refused_before_the_application_opens(tmp_path: Path,
                                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    glossary = tmp_path / "glossary.txt"
    glossary.write_bytes(b"db = data\xffbase\n")  # not UTF-8: only the query analysis reads it here
    settings = load_settings(host="127.0.0.1", port=0, metrics_enabled=False, data_dir=tmp_path / "data", glossary_path=glossary,
                             graph_enabled=False)
    opened: list[Application] = []
    real_open = Application.open

    async def open_(self: Application, **kwargs: bool) -> None:
        opened.append(self)
        await real_open(self, **kwargs)

    monkeypatch.setattr(Application, "open", open_)
    with pytest.raises(UnicodeDecodeError):
        await start_server(settings)
    assert opened == []  # no store, thread or model to close, no model chosen or timed
