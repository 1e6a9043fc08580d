"""Fixtures the command-line tests share: a clean environment and the API key.

(Ports nobody listens on and servers that never answer are in ``tests/conftest.py``.)
"""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator

import pytest

from helpers.data import KEY, KEY_VAR

#: What a command reads from the environment, besides the variables named ``OPENAI_*``.
COMMAND_VARIABLES = ("CHUNKWISE_MODEL", "NO_COLOR", KEY_VAR)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``OPENAI_*`` variable, ``$CHUNKWISE_MODEL``, ``$NO_COLOR`` or ``$KEY_VAR``.

    Every command-line test starts from this environment, and the processes it
    starts inherit it (see ``helpers.processes.run_python``).
    """
    for name in list(os.environ):
        if name.startswith("OPENAI_") or name in COMMAND_VARIABLES:
            monkeypatch.delenv(name)


@pytest.fixture(autouse=True)
def _collector() -> Iterator[None]:
    """The test process's garbage collector as it was, whatever ``serve`` or ``bench`` did.

    Both commands freeze the heap and change the collector's thresholds
    (``quiet_collector``); run in-process by a test, that must not outlive it.
    """
    thresholds = gc.get_threshold()
    yield
    gc.set_threshold(*thresholds)
    gc.unfreeze()


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """``$KEY_VAR`` holds :data:`helpers.data.KEY` (which this returns)."""
    monkeypatch.setenv(KEY_VAR, KEY)
    return KEY
