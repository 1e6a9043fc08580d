"""The examples' error branches, run for real: refused connections, timeouts, error chunks.

``examples/sdk_chunks.py --live`` crashed on any connection or timeout error
(it called a method the accumulator does not have) because those branches had
never run.  Here each example meets a port nobody listens on, and the SDK
example also a server that goes quiet, one that hangs up mid-stream, one
that sends an error chunk and one that wants a key.
"""

from __future__ import annotations

import pytest

from chunkwise_tools.server import ServerOptions, open_chat_server
from helpers.processes import run_python


@pytest.mark.parametrize("name", ["basic_stream", "fan_out", "tool_loop", "deadline"])
async def test_the_trio_examples_report_a_refused_connection(refused_port: int, name: str) -> None:
    base_url = f"http://127.0.0.1:{refused_port}/v1"
    # The deadline example's own deadline must outlast the retries' waits.
    extra = ["--seconds", "30"] if name == "deadline" else []
    status, out, err = await run_python(f"examples/{name}.py", "--base-url", base_url, *extra)
    assert (status, out) == (1, "")
    # Refused connections are retried (Endpoint.retries): the message counts the attempts.
    expected = f"cannot connect to 127.0.0.1:{refused_port}: connection refused (after 3 attempts)"
    assert err == f"error: {expected}\n"


# -- examples/sdk_chunks.py --live --------------------------------------------------


async def sdk_live(base_url: str, model: str = "text", *extra: str) -> tuple[int, str, str]:
    pytest.importorskip("openai")
    argv = ["examples/sdk_chunks.py", "--live", "--model", model, "--max-retries", "0", *extra]
    env = {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-example-0123456789"}
    return await run_python(*argv, env=env)


async def test_sdk_live_streams_from_chunkwise_serve() -> None:
    async with open_chat_server(ServerOptions(write_size=7)) as server:
        status, out, err = await sdk_live(server.base_url)
    assert (status, err) == (0, "")
    assert "日本語のテキスト" in out
    assert out.endswith("status: complete\n")


async def test_sdk_live_refused_connection_is_incomplete_not_a_crash(refused_port: int) -> None:
    status, out, err = await sdk_live(f"http://127.0.0.1:{refused_port}/v1")
    assert status == 1
    assert err == "the SDK raised APIConnectionError: Connection error.\n"
    assert out.endswith("status: incomplete (connection lost)\n")


async def test_sdk_live_timeout_keeps_what_arrived() -> None:
    # One event every 2 s; the SDK gives up after 0.5 s without a byte.
    async with open_chat_server(ServerOptions(delay=2.0)) as server:
        status, out, err = await sdk_live(server.base_url, "text", "--timeout", "0.5")
    assert status == 1
    assert err.startswith("the SDK raised APITimeoutError")
    assert "model: text" in out  # the first chunk arrived before the silence
    assert out.endswith("status: incomplete (idle timeout)\n")


async def test_sdk_live_hang_up_mid_stream_keeps_what_arrived() -> None:
    async with open_chat_server(ServerOptions(disconnect_after=1300)) as server:
        status, out, err = await sdk_live(server.base_url)
    assert status == 1
    assert err.startswith("the SDK raised APIConnectionError")
    assert out.startswith("Hello!")  # the text that arrived is shown and kept
    assert out.endswith("status: incomplete (connection lost)\n")


async def test_sdk_live_error_chunk_is_failed_with_the_servers_message() -> None:
    async with open_chat_server() as server:
        status, out, err = await sdk_live(server.base_url, "error")
    assert status == 1
    assert err.startswith("the SDK raised APIError: ")
    assert out.startswith("Let me think")  # content before the error is kept
    assert out.endswith(
        "status: failed: The server had an error while processing your request. Sorry about that!\n"
    )


async def test_sdk_live_http_error_is_failed() -> None:
    async with open_chat_server(ServerOptions(api_key="sk-the-right-key-0123456789")) as server:
        status, out, err = await sdk_live(server.base_url)
    assert status == 1
    assert err.startswith("the SDK raised AuthenticationError: ")
    assert "status: failed: " in out
    assert "Incorrect API key provided" in out
