"""The llama-server the opt-in live tests talk to: one for the session, started on first use.

The test modules skip themselves unless ``CHUNKWISE_LLAMA_SERVER`` names a
``llama-server`` binary; ``CHUNKWISE_LLAMA_MODEL`` names the scripted
``tiny.gguf`` (default: ``tiny.gguf`` beside the ``build/`` directory the
binary is in, as ``tests/llama_server/setup.sh`` lays them out).  The server
is started the way ``tests/llama_server/capture.py`` starts it for the
captures (its :func:`running_server`, on a free loopback port), with the
arguments the captures record in ``tests/data/llama_cpp/*_server.json``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import chunkwise
from helpers.data import DATA
from llama_server.capture import default_model, running_server


@pytest.fixture(scope="session")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[chunkwise.Endpoint]:
    """An endpoint (``http://127.0.0.1:PORT/v1``) of a llama-server serving the scripted model."""
    binary = Path(os.environ.get("CHUNKWISE_LLAMA_SERVER", ""))
    assert binary.is_file(), f"CHUNKWISE_LLAMA_SERVER: no file {binary}"
    model = Path(os.environ.get("CHUNKWISE_LLAMA_MODEL") or default_model(binary))
    assert model.is_file(), f"no scripted model at {model}: set CHUNKWISE_LLAMA_MODEL"
    # Every API was captured with the same arguments: one server serves them all.
    recorded = {
        json.dumps(json.loads(path.read_bytes())["llama_server_args"])
        for path in (DATA / "llama_cpp").glob("*_server.json")
    }
    assert len(recorded) == 1, f"the captures disagree on the server's arguments: {recorded}"
    args: list[str] = json.loads(recorded.pop())
    log = tmp_path_factory.mktemp("llama") / "llama-server.log"
    with running_server(binary, model, args, log) as (host, port):
        yield chunkwise.Endpoint(f"http://{host}:{port}/v1", trust_env=False)
