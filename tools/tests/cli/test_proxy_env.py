"""The command line reaches the API through the proxy the environment names, like curl.

The "proxy" here is a loopback test server that answers the request itself and
records it: an ``http://`` endpoint through an HTTP proxy is sent to the proxy
with an absolute URL as its target, so the API's host never needs to resolve.
"""

from __future__ import annotations

import pytest

from chunkwise.testing import RecordedRequest, ResponseWriter, ScriptedResponse, open_test_server
from helpers.bodies import choice, chunk, sse
from helpers.cli import run_main

API = "http://api.invalid:8080/v1"  # .invalid never resolves: only the proxy can reach it
ANSWER = ScriptedResponse(
    body=sse(chunk(choice(content="via the proxy")), chunk(choice(finish_reason="stop")))
)


async def answer(request: RecordedRequest, writer: ResponseWriter) -> None:
    await writer.play(ANSWER)


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY"])
async def test_chat_goes_through_the_proxy_the_environment_names(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    async with open_test_server(answer) as proxy:
        monkeypatch.setenv(variable, f"http://127.0.0.1:{proxy.port}")
        status, out, err = await run_main(capsys, "chat", "--base-url", API, "hello")
    assert (status, out) == (0, "via the proxy\n"), err
    [request] = proxy.requests
    assert request.target == f"{API}/chat/completions"  # absolute form, to the proxy
    assert request.headers["host"] == "api.invalid:8080"


async def test_no_proxy_sends_the_command_directly(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_test_server(answer) as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("NO_PROXY", ".invalid")
        status, _, err = await run_main(capsys, "record", "--base-url", API, "-o", "-", "hello")
    assert status == 1
    assert "the host name api.invalid did not resolve" in err
    assert proxy.requests == []
