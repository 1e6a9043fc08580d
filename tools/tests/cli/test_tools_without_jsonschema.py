"""Without the jsonschema extra a tool call is "not validated", never "rejected" or silent.

``ToolCall.validated`` is ``None`` both when no schema applies and when the
optional package is missing; ``ToolCall.validation_skipped`` says which, and
the demo, the command line, ``examples/tool_loop.py`` and the README's snippet
show it.  jsonschema is hidden in-process with ``sys.modules["jsonschema"] =
None`` (the import then fails) and in a subprocess with a package of that name
that raises ``ImportError`` first on the path.
"""

from __future__ import annotations

import io
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import chunkwise
from chunkwise_tools._convert import tool_call_to_json
from chunkwise_tools.cli._common import describe_tool_call
from chunkwise_tools.cli.demo import run_demo
from chunkwise_tools.server import ServerOptions, open_chat_server
from helpers.bodies import choice, chunk, tool
from helpers.cli import WEATHER_TOOL
from helpers.data import REPO
from helpers.processes import run_python
from helpers.reads import accumulate

pytest.importorskip("jsonschema")  # the "with jsonschema" half of each comparison

NO_JSONSCHEMA = "jsonschema is not installed"

TOOLS = [WEATHER_TOOL]


def completed_call(arguments: str, *, tools: Any = TOOLS) -> chunkwise.ToolCall:
    call = tool(0, id="call_1", name="get_weather", arguments=arguments)
    chunks = [chunk(choice(tool_calls=[call])), chunk(choice(finish_reason="tool_calls"))]
    _, result = accumulate(chunks, tools=tools)
    return result.choice(0).tool_calls[0]


@pytest.fixture
def without_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # `import jsonschema` now fails


@pytest.fixture
def hidden_jsonschema_path(tmp_path: Path) -> str:
    """A directory to put first on PYTHONPATH so that ``import jsonschema`` fails."""
    package = tmp_path / "hide" / "jsonschema"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('raise ImportError("hidden for this test")\n')
    return str(package.parent)


# -- the library ------------------------------------------------------------------


def test_validated_calls_say_nothing_was_skipped() -> None:
    call = completed_call('{"city": "Paris"}')
    assert (call.validated, call.validation_skipped, call.error) == (True, None, None)
    failing = completed_call('{"town": "Paris"}')
    assert (failing.validated, failing.validation_skipped) == (False, None)
    assert failing.error is not None


@pytest.mark.usefixtures("without_jsonschema")
def test_without_jsonschema_a_call_is_not_validated_and_says_why() -> None:
    call = completed_call('{"town": "Paris"}')  # would fail the schema
    assert call.validated is None
    assert call.error is None  # not rejected: not checked
    assert call.validation_skipped == NO_JSONSCHEMA
    assert call.parse_arguments() == {"town": "Paris"}
    # What can still be checked still is: a function that is not among the tools.
    unknown = completed_call("{}", tools=[{"type": "function", "function": {"name": "other"}}])
    assert unknown.error is not None
    assert unknown.validation_skipped is None


def test_without_tools_the_reason_is_that_none_were_given() -> None:
    call = completed_call('{"city": "Paris"}', tools=None)
    assert (call.validated, call.validation_skipped) == (None, "no tools were given")


def test_unusable_arguments_are_explained_by_the_error_not_a_skip() -> None:
    call = completed_call('{"city": ')
    assert call.error is not None
    assert (call.validated, call.validation_skipped) == (None, None)


def test_a_call_still_streaming_has_no_verdict_yet() -> None:
    acc = chunkwise.chat.Accumulator(tools=TOOLS)
    start = tool(0, id="c", name="get_weather", arguments="{")
    acc.feed(chunk(choice(tool_calls=[start])))
    call = acc.result.choice(0).tool_calls[0]
    assert (call.completed, call.validated, call.validation_skipped) == (False, None, None)


@pytest.mark.usefixtures("without_jsonschema")
def test_json_documents_and_the_cli_show_the_reason() -> None:
    call = completed_call('{"city": "Paris"}')
    assert tool_call_to_json(call)["validation_skipped"] == NO_JSONSCHEMA
    assert describe_tool_call(call) == [
        f'[tool call 0] get_weather (call_1) (not validated: {NO_JSONSCHEMA}): {{"city": "Paris"}}'
    ]


# -- the demo, the tool loop and the README ---------------------------------------


@pytest.mark.usefixtures("without_jsonschema")
async def test_the_demo_without_jsonschema_says_the_call_was_not_validated() -> None:
    out = io.StringIO()
    assert await run_demo(fast=True, out=out) == 0
    text = out.getvalue()
    assert f"validated: no, {NO_JSONSCHEMA} (pip install -e '.[jsonschema]' to check)" in text
    assert "rejected" not in text
    assert f"1. complete, with its tool call parsed and not validated ({NO_JSONSCHEMA})" in text


async def run_script(
    argv: list[str], *, base_url: str, hide: str | None = None
) -> tuple[int, str, str]:
    """Run ``python *argv`` against ``base_url``; ``hide`` goes first on ``PYTHONPATH``."""
    env = {"OPENAI_BASE_URL": base_url}
    if hide is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [hide, os.environ.get("PYTHONPATH")]))
    return await run_python(*argv, env=env)


@pytest.mark.parametrize("installed", [True, False], ids=["with jsonschema", "without"])
async def test_the_tool_loop_tells_not_validated_from_rejected(
    hidden_jsonschema_path: str, installed: bool
) -> None:
    argv = ["examples/tool_loop.py", "--model", "tools", "--followup-model", "text"]
    async with open_chat_server(ServerOptions()) as server:
        hide = None if installed else hidden_jsonschema_path
        status, out, err = await run_script(argv, base_url=server.base_url, hide=hide)
    assert (status, err) == (0, "")
    first = out.splitlines()[0]
    assert first.startswith('[tool call] get_weather {"city": "Paris", "unit": "celsius"} (')
    if installed:
        assert first.endswith("(valid)")
    else:
        assert first.endswith(f"(not validated: {NO_JSONSCHEMA})")
        assert "rejected" not in out
        assert "None" not in out
        assert f"error: not run: not validated: {NO_JSONSCHEMA}" in out


def readme_snippet(heading: str) -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index(heading) :]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None
    return match.group(1)


@pytest.mark.parametrize("installed", [True, False], ids=["with jsonschema", "without"])
async def test_the_readme_tool_snippet_prints_every_call(
    tmp_path: Path, hidden_jsonschema_path: str, installed: bool
) -> None:
    script = tmp_path / "readme_tools.py"
    script.write_text(readme_snippet("## Streaming with trio"), encoding="utf-8")
    # The snippet asks for gpt-4o-mini; this server answers it with tool calls.
    async with open_chat_server(ServerOptions(scenario="tools")) as server:
        hide = None if installed else hidden_jsonschema_path
        status, out, err = await run_script([str(script)], base_url=server.base_url, hide=hide)
    assert (status, err) == (0, "")
    if installed:
        assert "call get_weather {'city': 'Paris', 'unit': 'celsius'}" in out
    else:
        assert f"not validated get_weather {NO_JSONSCHEMA}" in out
    assert "complete, usage: {" in out  # the snippet asks for usage: not None
