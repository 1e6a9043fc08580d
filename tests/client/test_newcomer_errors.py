"""Errors a newcomer can act on, from the library itself (not only the command line).

A 401 says whether a key was sent at all, a 404 from a base URL without a version
segment asks "did you mean .../v1?", a name that does not resolve says so (and is
retried), a request that cannot be sent raises ``InvalidRequest`` naming where the bad
value is before anything is sent, and the slips of someone new to trio (``await``
instead of ``async with``, calling from asyncio) say what to do instead.
"""

from __future__ import annotations

import asyncio
import math
import re
import socket
import types
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

import chunkwise
from chunkwise import Client, Endpoint, HTTPStatusError, InvalidRequest, Retries, TransportError
from chunkwise._net.http import status_hint
from chunkwise.testing import LoopbackServer, ScriptedResponse, open_test_server
from helpers.bodies import choice, chunk
from helpers.data import KEY

REQUEST: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
STREAM = ScriptedResponse.sse([chunk(choice(content="hi", finish_reason="stop"))])


def client(endpoint: Endpoint) -> Client:
    # Nothing kept idle: each connection is closed when its request ends.
    return Client(endpoint, max_idle_connections=0)


# The four ways to open a stream, and the four to complete one.
OPENERS: dict[str, Callable[[Endpoint, Any], Any]] = {
    "chat.open_stream": chunkwise.chat.open_stream,
    "responses.open_stream": chunkwise.responses.open_stream,
    "client.chat.open_stream": lambda e, r: client(e).chat.open_stream(r),
    "client.responses.open_stream": lambda e, r: Client(
        e, max_idle_connections=0
    ).responses.open_stream(r),
}
COMPLETERS: dict[str, Callable[[Endpoint, Any], Any]] = {
    "chat.complete": chunkwise.chat.complete,
    "responses.complete": chunkwise.responses.complete,
    "client.chat.complete": lambda e, r: client(e).chat.complete(r),
    "client.responses.complete": lambda e, r: client(e).responses.complete(r),
}
#: The name each one's messages give: the module-level spelling.
NAMES = {key: "chunkwise." + key.removeprefix("client.") for key in (*OPENERS, *COMPLETERS)}


# -- what an error status suggests -----------------------------------------------

NO_KEY = "no API key was sent: the endpoint has no api_key"
KEY_REFUSED = "an API key was sent, and the server did not accept it"


def did_you_mean(base: str) -> str:
    return (
        f"did you mean {base}/v1? The base URL has no version segment such as /v1, "
        "and chunkwise uses it as given"
    )


# (status, base URL, api_key, extra headers) -> (hint, api_key_sent, suggested base URL)
HINTS: list[tuple[int, str, str | None, dict[str, str], str | None, bool, str | None]] = [
    (401, "https://api.example/v1", None, {}, NO_KEY, False, None),
    (403, "https://api.example/v1", None, {}, NO_KEY, False, None),
    (401, "https://api.example/v1", KEY, {}, KEY_REFUSED, True, None),
    (403, "https://api.example/v1", KEY, {}, None, True, None),
    # A key in a header of its own (Azure's api-key, relays' x-api-key, a hand-made
    # Authorization) was sent too.
    (401, "https://api.example/v1", None, {"api-key": KEY}, KEY_REFUSED, True, None),
    (401, "https://api.example/v1", None, {"X-Api-Key": KEY}, KEY_REFUSED, True, None),
    (401, "https://api.example/v1", None, {"Authorization": KEY}, KEY_REFUSED, True, None),
    (401, "https://api.example/v1", None, {"X-Org": "o"}, NO_KEY, False, None),
    (404, "https://api.example", KEY, {}, did_you_mean("https://api.example"), True,
     "https://api.example/v1"),
    (404, "https://relay.example/openai/", None, {}, did_you_mean("https://relay.example/openai"),
     False, "https://relay.example/openai/v1"),
    # Versioned base URLs: the 404 is about something else (a model, a route).
    (404, "https://api.example/v1", KEY, {}, None, True, None),
    (404, "https://api.example/api/v2beta/openai", KEY, {}, None, True, None),
    (404, "https://api.example/v1beta", KEY, {}, None, True, None),
    # Other statuses suggest nothing.
    (400, "https://api.example", None, {}, None, False, None),
    (429, "https://api.example", KEY, {}, None, True, None),
    (500, "https://api.example", None, {}, None, False, None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("status", "base_url", "api_key", "headers", "hint", "sent", "suggested"), HINTS
)
def test_what_each_status_suggests(
    status: int,
    base_url: str,
    api_key: str | None,
    headers: dict[str, str],
    hint: str | None,
    sent: bool,
    suggested: str | None,
) -> None:
    endpoint = Endpoint(base_url, api_key=api_key, headers=headers)
    found = status_hint(status, endpoint)
    assert (found.text, found.api_key_sent, found.suggested_base_url) == (hint, sent, suggested)
    assert KEY not in repr(found)


def versionless(server: LoopbackServer, **kwargs: Any) -> Endpoint:
    return Endpoint(server.base_url.removesuffix("/v1"), trust_env=False, **kwargs)


@pytest.mark.parametrize("opener", OPENERS)
async def test_a_404_from_a_base_url_without_v1_asks_did_you_mean(opener: str) -> None:
    async with open_test_server(ScriptedResponse.error(404, "Not Found")) as server:
        endpoint = versionless(server)
        with pytest.raises(HTTPStatusError) as info:
            async with OPENERS[opener](endpoint, REQUEST):
                pass  # pragma: no cover - the error is raised on entry
    error = info.value
    assert error.status_code == 404
    assert error.suggested_base_url == server.base_url
    assert str(error) == f"HTTP 404: Not Found ({did_you_mean(endpoint.base_url)})"
    assert error.hint == did_you_mean(endpoint.base_url)


# A base URL's path, and whether a 404 from it asks "did you mean <base>/v1?".  Only a
# whole path segment "v" + digits (+ a suffix such as "beta") is a version segment; a
# "v1" inside another segment is not.  Each of these bases gets a 404 from the emulator.
VERSION_SEGMENTS: list[tuple[str, bool]] = [
    ("", True),
    ("/openai", True),
    ("/dev1/openai", True),
    ("/openai/dev1", True),
    ("/apiv1", True),
    ("/models-v3", True),
    ("/v/1", True),
    ("/version1", True),
    ("/v1/openai", False),
    ("/api/v1/openai", False),
    ("/dev1/v1", False),
    ("/v2", False),
    ("/v10/openai", False),
    ("/v1beta", False),  # Gemini's OpenAI-compatible base: a version all the same
    ("/api/v2beta/openai", False),
]


@pytest.mark.parametrize(("path", "hinted"), VERSION_SEGMENTS)
async def test_a_404_asks_did_you_mean_v1_only_without_a_version_path_segment(
    path: str, hinted: bool
) -> None:
    """A 404 from a base URL with no version path segment (``/v1``, ``/v2beta``) asks "did
    you mean <base>/v1?"; a ``v1`` inside another segment (``/dev1``) is no version."""
    # OpenAI's answer to a path it does not know (the tools' emulator gives the same).
    unknown = ScriptedResponse.error(
        404, "Unknown request URL", type="invalid_request_error", code="unknown_url"
    )
    async with open_test_server(unknown) as server:
        base_url = server.base_url.removesuffix("/v1") + path
        with pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(Endpoint(base_url, trust_env=False), REQUEST)
    error = info.value
    assert error.status_code == 404
    assert error.error is not None and error.error.code == "unknown_url"
    if hinted:
        assert error.suggested_base_url == f"{base_url}/v1"
        assert error.hint == did_you_mean(base_url)
    else:
        assert (error.suggested_base_url, error.hint) == (None, None)


@pytest.mark.parametrize(
    ("api_key", "words", "sent"), [(None, NO_KEY, False), (KEY, KEY_REFUSED, True)]
)
async def test_a_401_says_whether_a_key_was_sent(
    api_key: str | None, words: str, sent: bool
) -> None:
    async with open_test_server(ScriptedResponse.error(401, "Incorrect API key")) as server:
        with pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(server.endpoint(api_key=api_key), REQUEST)
    assert str(info.value) == f"HTTP 401: Incorrect API key ({words})"
    assert info.value.api_key_sent is sent
    assert KEY not in str(info.value)


async def test_a_retried_404_keeps_its_hint_before_the_count_of_attempts() -> None:
    retries = Retries(max_retries=1, initial_delay=0.0, max_delay=0.0)
    # A 404 is retried only when the server says so.
    retry = ScriptedResponse.error(404, "Not Found", headers={"x-should-retry": "true"})
    async with open_test_server(retry) as server:
        endpoint = versionless(server, retries=retries)
        with pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    hint = did_you_mean(endpoint.base_url)
    assert str(info.value) == f"HTTP 404: Not Found ({hint}) (after 2 attempts)"
    assert info.value.hint == hint
    async with open_test_server(ScriptedResponse.error(500, "boom")) as server:
        endpoint = versionless(server, retries=retries)
        with pytest.raises(HTTPStatusError) as info:
            await chunkwise.chat.complete(endpoint, REQUEST)
    assert str(info.value) == "HTTP 500: boom (after 2 attempts)"
    assert info.value.hint is None


def test_an_error_rebuilt_without_the_endpoint_claims_nothing() -> None:
    error = HTTPStatusError(401, reason="Unauthorized")
    assert (error.hint, error.api_key_sent, error.suggested_base_url) == (None, None, None)
    assert str(error) == "HTTP 401: Unauthorized"


# -- a host name that does not resolve -------------------------------------------


class Unresolvable(trio.abc.HostnameResolver):
    """A resolver that knows no name: what DNS says of a typo in the host."""

    def __init__(self) -> None:
        self.lookups: list[str] = []

    async def getaddrinfo(self, host: Any, *args: Any, **kwargs: Any) -> Any:
        await trio.lowlevel.checkpoint()
        self.lookups.append(host.decode() if isinstance(host, bytes) else host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    async def getnameinfo(self, *args: Any) -> Any:  # pragma: no cover - not asked
        raise NotImplementedError


@pytest.fixture
async def resolver() -> Unresolvable:
    resolver = Unresolvable()
    trio.socket.set_custom_hostname_resolver(resolver)
    return resolver


async def test_a_host_name_that_does_not_resolve_says_so_and_is_retried(
    resolver: Unresolvable, autojump_clock: trio.testing.MockClock
) -> None:
    retries = Retries(max_retries=2, initial_delay=0.5, max_delay=8.0)
    endpoint = Endpoint("https://api.typo.example/v1", retries=retries)
    start = trio.current_time()
    with pytest.raises(TransportError) as info:
        await chunkwise.chat.complete(endpoint, REQUEST)
    assert str(info.value) == (
        "cannot connect to api.typo.example:443: the host name api.typo.example did not "
        "resolve (Name or service not known) (after 3 attempts)"
    )
    assert type(info.value) is TransportError
    assert isinstance(info.value.__cause__, socket.gaierror)  # the resolver's own error
    assert info.value.attempts == 3
    assert resolver.lookups == ["api.typo.example"] * 3
    assert trio.current_time() - start >= 0.5 * 0.75 + 1.0 * 0.75  # backed off between


async def test_without_retries_a_name_that_does_not_resolve_is_looked_up_once(
    resolver: Unresolvable,
) -> None:
    endpoint = Endpoint("http://api.typo.example/v1", retries=Retries(max_retries=0))
    with pytest.raises(TransportError, match=r"host name api\.typo\.example did not"):
        await chunkwise.chat.complete(endpoint, REQUEST)
    assert resolver.lookups == ["api.typo.example"]


# -- a request that cannot be sent ---------------------------------------------------


class Opaque:
    pass


def circular() -> dict[str, Any]:
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    messages.append(messages)
    return {"model": "m", "messages": messages}


def message(content: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": content}]}


# request -> (path, the message after "request <path> ", the encoder's error type)
BAD_REQUESTS: dict[str, tuple[Any, str, str, type[Exception]]] = {
    "bytes content": (
        message(b"hi"),
        "messages[0].content",
        "is of type bytes, which JSON cannot encode (decode bytes to str; base64 for binary data)",
        TypeError,
    ),
    "an object": (
        {"model": "m", "metadata": {"trace": Opaque()}},
        "metadata.trace",
        "is of type Opaque, which JSON cannot encode",
        TypeError,
    ),
    "a set": (
        {"model": "m", "stop": {"\n"}},
        "stop",
        "is of type set, which JSON cannot encode",
        TypeError,
    ),
    "NaN": (
        {"model": "m", "temperature": math.nan},
        "temperature",
        "is nan, which JSON cannot represent (allowed numbers are finite)",
        ValueError,
    ),
    "infinity deep inside": (
        {"model": "m", "tools": [{"function": {"parameters": {"max": -math.inf}}}]},
        "tools[0].function.parameters.max",
        "is -inf, which JSON cannot represent (allowed numbers are finite)",
        ValueError,
    ),
    "a lone surrogate": (
        message("caf\udce9"),
        "messages[0].content",
        "is a string holding a lone surrogate (U+DCE9), which is not Unicode text and "
        "cannot be sent as UTF-8",
        UnicodeEncodeError,
    ),
    "a tuple key": (
        {"model": "m", "logit_bias": {(1, 2): 5}},
        "logit_bias",
        "has a key of type tuple; JSON keys are strings",
        TypeError,
    ),
    "a key that is not an identifier": (
        {"model": "m", "extra": {"a-b": [1, {"c": b""}]}},
        "extra['a-b'][1].c",
        "is of type bytes, which JSON cannot encode (decode bytes to str; base64 for binary data)",
        TypeError,
    ),
    "a circular reference": (
        circular(),
        "messages[1]",
        "closes a circular reference (a container holding itself), which JSON cannot encode",
        ValueError,
    ),
}


@pytest.mark.parametrize("case", BAD_REQUESTS)
@pytest.mark.parametrize("opener", OPENERS)
async def test_a_value_json_cannot_encode_is_named_by_its_path_before_anything_is_sent(
    case: str, opener: str
) -> None:
    request, path, problem, cause = BAD_REQUESTS[case]
    async with open_test_server(STREAM) as server:
        with pytest.raises(InvalidRequest) as info:
            async with OPENERS[opener](server.endpoint(api_key=KEY), request):
                pass  # pragma: no cover - raised on entry
        assert server.connections == []  # nothing was sent, no connection made
    error = info.value
    assert str(error) == f"request {path} {problem}"
    assert error.path == path
    assert isinstance(error, chunkwise.ChunkwiseError) and isinstance(error, TypeError)
    assert isinstance(error.__cause__, cause)  # json's own error, for the details


@pytest.mark.parametrize("request_", [[("model", "m")], "model=m", None, 42, b"{}"])
@pytest.mark.parametrize("completer", COMPLETERS)
async def test_a_request_that_is_not_a_mapping_is_refused(request_: Any, completer: str) -> None:
    endpoint = Endpoint("http://127.0.0.1:9/v1")  # never reached
    with pytest.raises(InvalidRequest) as info:
        await COMPLETERS[completer](endpoint, request_)
    assert str(info.value) == (
        "the request must be a mapping: the JSON body, such as "
        f"{{'model': ..., 'messages': [...]}}, not {type(request_).__qualname__}"
    )
    assert info.value.path == ""


async def test_too_deep_a_request_is_refused_too() -> None:
    deep: dict[str, Any] = {}
    for _ in range(10_000):
        deep = {"a": deep}
    with pytest.raises(InvalidRequest, match="cannot be encoded as JSON") as info:
        await chunkwise.chat.complete(Endpoint("http://127.0.0.1:9/v1"), {"x": deep})
    assert isinstance(info.value.__cause__, RecursionError)


async def test_any_mapping_is_a_json_object_at_every_level() -> None:
    request = types.MappingProxyType(
        {"model": "m", "messages": (types.MappingProxyType({"role": "user", "content": "é"}),)}
    )
    async with open_test_server(STREAM) as server:
        result = await chunkwise.chat.complete(server.endpoint(), request)
    assert result.content == "hi"
    assert server.requests[0].json() == {
        "model": "m",
        "messages": [{"role": "user", "content": "é"}],
        "stream": True,
    }


# -- trio, not asyncio; async with, not await -------------------------------------


@pytest.mark.parametrize("opener", OPENERS)
async def test_awaiting_a_stream_says_to_use_async_with(opener: str) -> None:
    name = NAMES[opener]
    complete = name.replace(".open_stream", ".complete")
    block = OPENERS[opener](Endpoint("http://127.0.0.1:9/v1"), REQUEST)
    with pytest.raises(TypeError) as info:
        await block
    assert str(info.value) == (
        f"{name}() is an async context manager: it cannot be awaited; use "
        f"'async with {name}(...) as stream:' (or 'await {complete}(...)' for the result alone)"
    )
    with pytest.raises(TypeError, match=r"cannot be entered with a plain 'with'; use 'async"):
        with block:
            pass  # pragma: no cover - refused
    async with open_test_server(STREAM) as server:  # a block refused is still usable
        block = OPENERS[opener](server.endpoint(), REQUEST)
        with pytest.raises(TypeError):
            await block
        async with block as stream:
            await stream.result()


@pytest.mark.parametrize("completer", COMPLETERS)
def test_calling_from_asyncio_says_chunkwise_runs_under_trio(completer: str) -> None:
    endpoint = Endpoint("http://127.0.0.1:9/v1")

    async def main() -> None:
        await COMPLETERS[completer](endpoint, REQUEST)

    with pytest.raises(RuntimeError) as info:
        asyncio.run(main())
    name = NAMES[completer]
    assert str(info.value) == (
        f"{name}() was called from asyncio, but chunkwise runs under trio: run your program "
        "with trio.run() (from an asyncio program, trio-asyncio can call it)"
    )
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_outside_any_event_loop_it_says_to_run_it_in_trio() -> None:
    coroutine = chunkwise.chat.complete(Endpoint("http://127.0.0.1:9/v1"), REQUEST)
    with pytest.raises(RuntimeError) as info:
        coroutine.send(None)
    assert str(info.value) == (
        "chunkwise.chat.complete() must be called from a trio task (inside trio.run())"
    )


def test_a_client_entered_from_asyncio_says_chunkwise_runs_under_trio() -> None:
    async def main() -> None:
        async with Client(Endpoint("http://127.0.0.1:9/v1")):
            pass  # pragma: no cover - refused on entry

    with pytest.raises(RuntimeError, match=r"^chunkwise\.Client was called from asyncio, but"):
        asyncio.run(main())


@pytest.mark.parametrize("opener", OPENERS)
def test_a_stream_opened_from_asyncio_says_chunkwise_runs_under_trio(opener: str) -> None:
    async def main() -> None:
        async with OPENERS[opener](Endpoint("http://127.0.0.1:9/v1"), REQUEST):
            pass  # pragma: no cover - refused on entry

    name = re.escape(NAMES[opener])
    with pytest.raises(RuntimeError, match=rf"^{name}\(\) was called from asyncio, but chunkwise"):
        asyncio.run(main())
