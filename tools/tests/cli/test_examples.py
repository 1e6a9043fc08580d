"""The runnable examples in ``examples/`` run and say what they should."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import attrs
import pytest

import chunkwise
from helpers.data import RECORDINGS, REPO
from helpers.processes import run_python

EXAMPLES = REPO / "examples"

pytest.importorskip("openai")


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def test_sdk_chunks_offline() -> None:
    # Offline mode must not depend on (or use) a key that happens to be set:
    # the conftest removes $OPENAI_API_KEY.
    status, out, err = await run_python("examples/sdk_chunks.py")
    assert (status, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "replaying parallel_tool_calls.sse as openai ChatCompletionChunk objects"
    assert (
        "[choice 0] tool call GetWeatherArgs (call_JMW1whyEaYG438VE1OIflxA2): "
        '{"city": "Edinburgh", "country": "GB", "units": "c"}'
    ) in lines
    assert (
        "[choice 0] tool call get_stock_price (call_DNYTawLBoN8fj3KN6qU9N1Ou): "
        '{"ticker": "AAPL", "exchange": "NASDAQ"}'
    ) in lines
    assert "[choice 0] finish_reason: tool_calls" in lines
    assert "model: gpt-4o-2024-08-06" in lines
    assert lines[-1] == "status: complete"


async def test_sdk_chunks_offline_text() -> None:
    recording = EXAMPLES / "recordings" / "text.sse"
    status, out, err = await run_python("examples/sdk_chunks.py", str(recording.relative_to(REPO)))
    assert (status, err) == (0, "")
    parser = chunkwise.chat.Parser()
    parser.feed(recording.read_bytes())
    parser.end()
    assert parser.result.content in out
    assert "[choice 0] finish_reason: stop" in out
    assert out.endswith("status: complete\n")


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.name)
def test_sdk_path_matches_raw_bytes(recording: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The SDK route the example shows reconstructs exactly what parsing the
    # raw body does; only [DONE], which the SDK swallows, is not seen.
    example = load_example("sdk_chunks")
    via_sdk = example.accumulate(example.recorded_chunks(recording))
    parser = chunkwise.chat.Parser()
    parser.feed(recording.read_bytes())
    parser.end()
    assert via_sdk.done_received is False
    assert attrs.evolve(via_sdk, done_received=True) == parser.result
    capsys.readouterr()
