"""The public face: its size, its lazy trio half, and every round-3 spelling still working.

Each renamed spelling of :data:`chunkwise._core.names.RENAMED` must give the same
object (or do the same thing) as its new spelling, with one
:class:`DeprecationWarning` that names the new spelling; the new spellings
themselves never warn (the suite runs with warnings as errors).
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import chunkwise
from chunkwise._core.names import RENAMED
from chunkwise.testing import ScriptedResponse, open_test_server
from helpers.bodies import (
    choice,
    chunk,
    message_item,
    response_object,
    response_sse,
    sse,
    text_events,
)

MODULE_NAMES = sorted(old for old in RENAMED if old.count(".") == 1)


def resolve(spelling: str) -> Any:
    module, _, name = spelling.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_the_top_level_keeps_at_most_45_names() -> None:
    assert len(chunkwise.__all__) <= 45
    assert not any(
        name.startswith(("Chat", "Response", "Completion")) for name in chunkwise.__all__
    )


def test_every_top_level_name_resolves_without_a_warning() -> None:
    for name in chunkwise.__all__:
        assert getattr(chunkwise, name) is not None


@pytest.mark.parametrize("old", MODULE_NAMES)
def test_a_round_3_name_is_its_new_spelling_with_a_warning_naming_it(old: str) -> None:
    new = RENAMED[old]
    with pytest.warns(DeprecationWarning, match=re.escape(new)) as caught:
        value = resolve(old)
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith(f"{old} is deprecated") and new in message
    assert caught[0].filename == __file__  # it points at the user's line
    if old != "chunkwise.open_response_stream":  # the old signature is kept: see below
        assert value is resolve(new)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="ChatStreamParsr"):
        _ = chunkwise.ChatStreamParsr  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        _ = chunkwise.chat.ChatResult  # type: ignore[attr-defined]


def test_the_renamed_accumulator_methods_warn_and_do_the_same() -> None:
    body = chunk(choice(content="Hi", finish_reason="stop"))
    for namespace in (chunkwise.chat, chunkwise.completions):
        old, new = namespace.Accumulator(), namespace.Accumulator()
        with pytest.warns(DeprecationWarning, match=rf"{namespace.__name__}\.Accumulator\.feed\b"):
            events = old.feed_chunk(body)
        assert events == new.feed(body)
        done = chunkwise.ServerSentEvent(data="[DONE]")
        with pytest.warns(DeprecationWarning, match="feed_sse"):
            events = old.feed_event(done)
        assert events == new.feed_sse(done)
        assert old.result == new.result
    event = {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}}
    old_r, new_r = chunkwise.responses.Accumulator(), chunkwise.responses.Accumulator()
    with pytest.warns(DeprecationWarning, match=r"responses\.Accumulator\.feed\b"):
        assert old_r.feed_event(event) == new_r.feed(event)


CHAT_BODY = ScriptedResponse(
    body=sse(chunk(choice(content="Hel")), chunk(choice(content="lo", finish_reason="stop")))
)
RESPONSE_BODY = ScriptedResponse(
    body=response_sse(
        {"type": "response.created", "response": response_object()},
        *text_events(0, "msg_1", ["Hel", "lo"]),
        {
            "type": "response.completed",
            "response": response_object("completed", [message_item("msg_1", "Hello")]),
        },
    )
)


async def test_the_renamed_client_methods_warn_and_do_the_same() -> None:
    request = {"model": "m", "messages": []}
    async with open_test_server(CHAT_BODY) as server:
        async with chunkwise.Client(server.endpoint()) as client:
            with pytest.warns(DeprecationWarning, match=r"Client\.chat\.complete"):
                old = await client.complete_chat(request)
            new = await client.chat.complete(request)
            with pytest.warns(DeprecationWarning, match=r"Client\.chat\.open_stream"):
                async with client.open_chat_stream(request) as stream:
                    streamed = await stream.result()
    assert old.content == new.content == streamed.content == "Hello"


def test_open_response_stream_keeps_its_round_3_arguments() -> None:
    endpoint = chunkwise.Endpoint(base_url="http://127.0.0.1:9/v1")
    with pytest.warns(DeprecationWarning, match=r"responses\.attach"):
        open_response_stream = getattr(chunkwise, "open_response_stream")  # noqa: B009
    # A request or a response id, never both nor neither; starting_after with an id.
    cases: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((), {}),
        (({"model": "m"},), {"response_id": "resp_1"}),
        (({"model": "m"},), {"starting_after": 3}),
    ]
    for args, kwargs in cases:
        with pytest.raises(TypeError):
            open_response_stream(endpoint, *args, **kwargs)
    open_response_stream(endpoint, response_id="resp_1", starting_after=2)


def test_importing_the_sans_io_faces_imports_neither_trio_nor_h11() -> None:
    code = (
        "import sys\n"
        "import chunkwise, chunkwise.errors, chunkwise.types\n"
        "from chunkwise.chat import Parser\n"
        "from chunkwise.responses import Parser\n"
        "from chunkwise.completions import Parser\n"
        "print(sorted(m for m in ('trio', 'h11', 'ssl') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['ssl']"  # ssl: an Endpoint's verifying context; not trio, not h11


def test_the_trio_half_loads_on_first_use_and_reports_its_namespace() -> None:
    code = (
        "import sys, chunkwise\n"
        "assert 'trio' not in sys.modules\n"
        "print(chunkwise.responses.attach.__module__, chunkwise.Client.__module__)\n"
        "print('trio' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["chunkwise.responses", "chunkwise", "True"]


def test_the_same_concept_has_the_same_name_in_every_namespace() -> None:
    namespaces = (chunkwise.chat, chunkwise.responses, chunkwise.completions, chunkwise.messages)
    for namespace in namespaces:
        delta = namespace.TextDelta
        assert delta.__name__ == "TextDelta" and delta.is_content and delta.family == "choice"
        assert namespace.Parser.__module__ == namespace.__name__
        assert repr(namespace.Result).endswith(f"'{namespace.__name__}.Result'>")
    assert chunkwise.chat.ChoiceFinished is chunkwise.completions.ChoiceFinished


async def test_a_response_is_attached_to_through_the_new_spelling() -> None:
    async with open_test_server(RESPONSE_BODY) as server:
        async with chunkwise.responses.attach(server.endpoint(), "resp_1", 0) as stream:
            result = await stream.result()
        assert server.requests[0].target.endswith("/responses/resp_1?stream=true&starting_after=0")
    assert result.output_text == "Hello"


def test_the_migration_page_lists_every_renamed_spelling() -> None:
    # docs/migration.rst is the table users read; RENAMED is what the warnings say.
    page = (Path(__file__).parents[1] / "docs" / "migration.rst").read_text()
    rows = dict(re.findall(r"\* - ``([^`]+)``\n\s+- ``([^`]+)``", page))
    assert rows.keys() == RENAMED.keys()
    for old, new in RENAMED.items():
        assert new.startswith(rows[old]), (old, rows[old], new)
