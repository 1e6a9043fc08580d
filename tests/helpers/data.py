"""The test data: recorded streams, provider vectors, the repository, the test API key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: The repository: the examples and the docs are read, and processes run, from here.
REPO = Path(__file__).resolve().parent.parent.parent
DATA = REPO / "tests" / "data"
#: Real OpenAI streams, recorded byte for byte (see data/README.md).
RECORDINGS = sorted((DATA / "openai_recordings").glob("*.sse"))


def load_vectors() -> list[dict[str, Any]]:
    """The provider streams of ``data/provider_streams.json``, each with its expectations."""
    with open(DATA / "provider_streams.json", encoding="utf-8") as f:
        vectors: list[dict[str, Any]] = json.load(f)
    return vectors


#: the ``api_key`` fixture (``tools/tests/cli/conftest.py``) puts in it.
KEY_VAR = "CHUNKWISE_TEST_KEY"
KEY = "sk-test-SECRET-0123456789abcdef"
