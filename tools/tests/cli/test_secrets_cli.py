"""The API key never leaks from the tools' outputs: a result's JSON, ``--json`` output,
and ``record`` files, which hold the key only where the server itself quoted it back.

(Moved from the library's ``tests/client/test_secrets.py``, which keeps the
library's own surfaces: reprs, errors, tracebacks, log records, events and results.)
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
import trio

import chunkwise
import chunkwise_tools._convert
import chunkwise_tools.cli
from chunkwise.testing import ScriptedResponse, open_test_server
from helpers.bodies import choice, chunk, sse

KEY = "sk-proj-SECRETfa1afe1c0ffee0ddba11"
TAIL = KEY[-12:]  # what a partially masked echo would still show
REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
BODY = sse(
    chunk(choice(role="assistant", content="Hé")),
    chunk(choice(content=" there")),
    chunk(choice(finish_reason="stop")),
    {**chunk(), "choices": [], "usage": {"prompt_tokens": 1, "total_tokens": 2}},
)
BOUND = 30.0


def assert_no_key(*texts: str) -> None:
    for text in texts:
        assert KEY not in text and TAIL not in text, text


async def test_the_json_of_events_and_result_never_holds_the_key() -> None:
    # What ``chunkwise inspect --json`` and ``chat --json`` print for a result.
    async with open_test_server(ScriptedResponse(body=BODY, write_sizes=7)) as server:
        with trio.fail_after(BOUND):
            async with chunkwise.chat.open_stream(server.endpoint(api_key=KEY), REQUEST) as stream:
                channel = stream.subscribe()
                async with channel:
                    events = [event async for event in channel]
                result = await stream.result()
    assert result.status == "complete"
    assert_no_key(json.dumps(chunkwise_tools._convert.result_to_json(result)))
    assert_no_key(json.dumps([attrs.asdict(e) for e in events], default=repr))


# --- the command line: record files and --json output ------------------------------


def run_cli(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """Run ``chunkwise`` in a thread (it calls trio.run itself); capture its output."""
    stdout, stderr = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdout", stdout)
    monkeypatch.setattr("sys.stderr", stderr)
    code = chunkwise_tools.cli.main(argv)
    return code, stdout.getvalue(), stderr.getvalue()


def cli_cases() -> Iterator[Any]:
    scripts = {
        "ok": ScriptedResponse(body=BODY, write_sizes=5),
        "401-echoing-the-key": ScriptedResponse.error(401, f"Incorrect API key provided: {KEY}"),
        "stream-error-echoing-the-key": ScriptedResponse(
            body=sse({"error": {"message": f"bad key {KEY}"}})
        ),
    }
    for command in ("chat --json", "record"):
        for name, script in scripts.items():
            yield pytest.param(script, command, id=f"{command}-{name}")


@pytest.mark.parametrize(("script", "command"), list(cli_cases()))
async def test_cli_output_never_holds_the_key_and_a_recording_only_what_the_server_sent(
    script: ScriptedResponse,
    command: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("CHUNKWISE_TEST_KEY", KEY)
    output = tmp_path / "recording.txt"
    async with open_test_server(script) as server:
        argv = [
            *command.split(),
            "hello",
            "--base-url",
            server.base_url,
            "--api-key-env",
            "CHUNKWISE_TEST_KEY",
        ]
        if command == "record":
            argv += ["-o", str(output)]
        with trio.fail_after(BOUND):
            code, out, err = await trio.to_thread.run_sync(run_cli, argv, monkeypatch)
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert code in (0, 1), (code, out, err)
    assert_no_key(out, err, caplog.text)
    if command == "record":
        recorded = output.read_bytes().decode("utf-8", "replace")
        assert recorded.startswith("HTTP/1.1 ")
        # No request header is ever written.  A recording is evidence: the key
        # is in it only where the server quoted it back (a warning then says
        # so, see tools/tests/cli/test_record.py).
        assert "authorization" not in recorded.lower()
        assert f"Bearer {KEY}" not in recorded
        assert recorded.count(KEY) == script.body.decode().count(KEY)
    else:
        for line in out.splitlines():
            json.loads(line)  # --json prints JSON lines only
