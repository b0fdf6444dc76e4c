from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from retrieval.v1 import retrieval_pb2_grpc
from retrieval_server.config import Settings, load_settings
from retrieval_server.server import RunningServer, start_server


def e2e_settings(data_dir: Path) -> Settings:
    # Larger children so Search's 800-character trim is exercised: as large as the model reads beside
    # [CLS] and [SEP].
    return load_settings(host="127.0.0.1", port=0, metrics_port=0, data_dir=data_dir, parent_chunk_tokens=512, child_chunk_tokens=254, child_overlap_tokens=32,
                         max_document_bytes=2 * 1024 * 1024)


@dataclass
class Live:
    running: RunningServer
    channel: grpc.aio.Channel
    stub: retrieval_pb2_grpc.RetrievalServiceStub

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.running.port}"


@pytest_asyncio.fixture(scope="module")
async def live(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Live]:
    running = await start_server(e2e_settings(tmp_path_factory.mktemp("e2e-data")))
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{running.port}")
    yield Live(running, channel, retrieval_pb2_grpc.RetrievalServiceStub(channel))
    await channel.close()
    await running.stop(1.0)
