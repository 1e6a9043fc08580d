"""The runnable examples in ``examples/`` run and say what they should."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import attrs
import pytest

import chunkwise

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
RECORDINGS = Path(__file__).resolve().parents[1] / "data" / "openai_recordings"

pytest.importorskip("openai")


def run_example(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUTF8="1")
    # Offline mode must not depend on (or use) a key that happens to be set.
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
        check=False,
    )


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sdk_chunks_offline() -> None:
    proc = run_example("examples/sdk_chunks.py")
    assert (proc.returncode, proc.stderr) == (0, "")
    lines = proc.stdout.splitlines()
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


def test_sdk_chunks_offline_text() -> None:
    recording = EXAMPLES / "recordings" / "text.sse"
    proc = run_example("examples/sdk_chunks.py", str(recording.relative_to(REPO)))
    assert (proc.returncode, proc.stderr) == (0, "")
    parser = chunkwise.ChatStreamParser()
    parser.feed(recording.read_bytes())
    parser.end()
    assert parser.result.content in proc.stdout
    assert "[choice 0] finish_reason: stop" in proc.stdout
    assert proc.stdout.endswith("status: complete\n")


@pytest.mark.parametrize("recording", sorted(RECORDINGS.glob("*.sse")), ids=lambda p: p.name)
def test_sdk_path_matches_raw_bytes(recording: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The SDK route the example shows reconstructs exactly what parsing the
    # raw body does; only [DONE], which the SDK swallows, is not seen.
    example = load_example("sdk_chunks")
    via_sdk = example.accumulate(example.recorded_chunks(recording))
    parser = chunkwise.ChatStreamParser()
    parser.feed(recording.read_bytes())
    parser.end()
    assert via_sdk.done_received is False
    assert attrs.evolve(via_sdk, done_received=True) == parser.result
    capsys.readouterr()
