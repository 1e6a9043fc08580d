"""Scripted Responses API streams: the chat scenarios' words, as ``POST /v1/responses`` says them.

A :class:`ResponseScenario` is plain data saying *what* the assistant says
(reasoning, text pieces, function calls with their argument fragments) and
*how it ends* (completed, cut by ``max_output_tokens``, failed by a mid-stream
error), and a :class:`ResponseStyle` saying *how a provider writes it*: as
OpenAI documents it, or as llama.cpp's ``llama-server`` does, with keepalive
events or not, with the ``error`` event nested or flat.  The words are taken
from the chat scenarios (:data:`~chunkwise_tools.server._scenarios.SCENARIOS`), so
both APIs of the server say the same things; ``mixed`` has its own
words, one answer with reasoning, parallel calls and text (no chat
choice says all three), and so have the scenarios of the rest of the
surface, whose hosted tools, custom tool calls, citations and audio no chat
scenario has (:class:`ToolItem`, :class:`Citation`).  :mod:`._response_wire` turns a
scenario into the events and bytes of a stream, by the rules written there.

Pure data: no I/O, no trio.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from ._scenarios import SCENARIOS, SPOKEN, AudioScript, Scenario, ToolCallScript

__all__ = [
    "DEFAULT_RESPONSE_SCENARIO",
    "RESPONSE_SCENARIOS",
    "Citation",
    "ResponseScenario",
    "ResponseStyle",
    "ToolItem",
    "answering_tool_results",
]

DEFAULT_RESPONSE_SCENARIO = "text"
#: ``usage.input_tokens`` of every scripted response (the chat scenarios' prompt_tokens).
INPUT_TOKENS = 19

Dialect = Literal["openai", "llama.cpp"]
Outcome = Literal["completed", "max_output_tokens", "error"]


@attrs.frozen(kw_only=True)
class ResponseStyle:
    """How a provider writes a Responses stream.

    Attributes:
        dialect: ``"openai"`` (the documented shapes, rule 1) or
            ``"llama.cpp"`` (rule 5).
        keepalive: send ``keepalive`` events (rule 6).
        error_shape: how an OpenAI-style ``error`` event is written:
            ``"nested"`` (``{"type": "error", "error": {...}}``, as OpenAI
            sends it live) or ``"flat"`` (``code`` and ``message`` at the top,
            as documented).  llama.cpp always sends its bare frame.
    """

    dialect: Dialect = "openai"
    keepalive: bool = False
    error_shape: Literal["nested", "flat"] = "nested"


@attrs.frozen(kw_only=True)
class ToolItem:
    """One output item that is not a message, a reasoning or a function call.

    A hosted tool's call (web search, file search, code interpreter, image
    generation, MCP, shell), its progress told by ``response.<type>.<phase>``
    events; or a custom tool call, which has none.  :mod:`._response_wire`'s
    rule 8 says in which order its events go.

    Attributes:
        type: the item's ``type`` (``"web_search_call"``, ``"mcp_call"``...).
        id: the item's ``id``.
        before: the progress phases sent before its streamed input, each a
            ``response.<type>.<phase>`` event (``in_progress``, ``searching``...).
        fragments: its streamed input, one delta each: a code interpreter's
            code, an MCP call's arguments, a custom tool call's input, a shell
            call's command, a shell output's stdout.
        partial_images: base64 images sent as ``partial_image`` events, after
            ``before`` and the input.
        after: the progress phases sent after them (``interpreting``,
            ``completed``...).
        fields: the finished item's other fields (``call_id``, ``action``,
            ``outputs``, ``result``...), as ``output_item.done`` and the
            terminal ``output`` hold them.
        pending: the fields whose value differs while the item runs, as
            ``output_item.added`` has them (``status``, results still null).
    """

    type: str
    id: str
    before: tuple[str, ...] = ()
    fragments: tuple[str, ...] = ()
    partial_images: tuple[str, ...] = ()
    after: tuple[str, ...] = ()
    # Compared, not hashed (as Scenario's mappings): a scenario stays hashable.
    fields: Mapping[str, Any] = attrs.field(factory=dict, hash=False)
    pending: Mapping[str, Any] = attrs.field(factory=dict, hash=False)

    @property
    def input(self) -> str:
        """The complete streamed input."""
        return "".join(self.fragments)


@attrs.frozen(kw_only=True)
class Citation:
    """A ``url_citation`` annotation on the message's text: the text it cites, and where from."""

    url: str
    title: str
    cited: str


@attrs.frozen(kw_only=True)
class ResponseScenario:
    """A scripted Responses answer, and the style it is sent in.

    Attributes:
        name: the model name that selects it.
        summary: one line for ``--help``.
        reasoning: reasoning pieces (a summary's deltas; llama.cpp's
            ``reasoning_text`` deltas).
        content: the message's text pieces, one delta each.
        tool_calls: function calls, after the message (before it when
            ``calls_first``).
        calls_first: the function calls come before the message, as in an
            answer that calls tools and says something in the same turn.
        tool_items: hosted tool calls and custom tool calls, streamed after
            the reasoning and before the function calls and the message.
        citations: ``url_citation`` annotations on the message's text, each
            announced by ``response.output_text.annotation.added`` once the
            text it cites has streamed (none when that text is not there, as
            in a structured answer).
        audio: spoken output, its ``response.audio.*`` and
            ``response.audio.transcript.*`` events sent beside the message's
            text deltas.
        outcome: ``"completed"``, ``"max_output_tokens"`` (rule 3) or
            ``"error"`` (rule 4).
        output_tokens: ``usage.output_tokens``.
        reasoning_tokens: ``usage.output_tokens_details.reasoning_tokens``.
        error: the error of an ``"error"`` outcome (``message``, ``type``,
            ``code``, ``param``).
        style: see :class:`ResponseStyle`.
    """

    name: str
    summary: str
    reasoning: tuple[str, ...] = ()
    content: tuple[str, ...] = ()
    tool_calls: tuple[ToolCallScript, ...] = ()
    calls_first: bool = False
    tool_items: tuple[ToolItem, ...] = ()
    citations: tuple[Citation, ...] = ()
    audio: AudioScript | None = None
    outcome: Outcome = "completed"
    output_tokens: int = 20
    reasoning_tokens: int = 0
    error: Mapping[str, Any] | None = None
    style: ResponseStyle = ResponseStyle()

    @property
    def text(self) -> str:
        """The complete message text."""
        return "".join(self.content)

    @property
    def reasoning_text(self) -> str | None:
        """The complete reasoning, or None when there is none."""
        return "".join(self.reasoning) if self.reasoning else None

    @property
    def llama_cpp(self) -> bool:
        return self.style.dialect == "llama.cpp"

    def call_id(self, call: ToolCallScript) -> str:
        """The ``call_id`` ``call`` is sent with."""
        return call.id


def _from_chat(
    chat: Scenario,
    summary: str,
    *,
    name: str | None = None,
    outcome: Outcome | None = None,
    style: ResponseStyle = ResponseStyle(),
) -> ResponseScenario:
    """The Responses version of a chat scenario: the same words, the same calls."""
    details = chat.usage.get("completion_tokens_details") or {}
    if outcome is None:
        outcome = "error" if chat.error is not None else "completed"
    return ResponseScenario(
        name=name or chat.name,
        summary=summary,
        reasoning=chat.reasoning,
        content=chat.content,
        tool_calls=chat.tool_calls,
        outcome=outcome,
        output_tokens=int(chat.usage.get("completion_tokens", 0)),
        reasoning_tokens=int(details.get("reasoning_tokens", 0)),
        error=chat.error,
        style=style,
    )


_OPENAI = ResponseStyle()
_LLAMA = ResponseStyle(dialect="llama.cpp")
_KEEPALIVE = ResponseStyle(keepalive=True)
_FLAT = ResponseStyle(error_shape="flat")
_CUT: Outcome = "max_output_tokens"

# name, the chat scenario whose words it says, style, outcome (None: the chat's), summary.
# fmt: off
_TABLE: tuple[tuple[str, str, ResponseStyle, Outcome | None, str], ...] = (
    ("text", "text", _OPENAI, None, "a few sentences with multibyte characters (é, 日本語, emoji)"),
    ("tools", "tools", _OPENAI, None, "two parallel get_weather calls, their deltas interleaved"),
    ("reasoning", "reasoning", _OPENAI, None, "a reasoning summary, then the message"),
    ("length", "length", _OPENAI, _CUT, "cut by max_output_tokens: response.incomplete"),
    ("error", "error", _OPENAI, None, "some text, a nested error event, then response.failed"),
    ("demo", "demo", _OPENAI, None, "multibyte text, then one get_weather function call"),
    ("structured-invalid", "structured-invalid", _OPENAI, None, "JSON breaking text.format"),
    ("quirks-keepalive", "text", _KEEPALIVE, None, "text with keepalive events between events"),
    ("quirks-flat-error", "error", _FLAT, None, "the error scenario with a flat error event"),
    ("quirks-llamacpp", "text", _LLAMA, None, "llama.cpp's text: no indices, no sequence numbers"),
    ("quirks-llamacpp-tools", "tools", _LLAMA, None, "llama.cpp's calls: no indices, no .done"),
    ("quirks-llamacpp-reasoning", "reasoning", _LLAMA, None, "llama.cpp's reasoning_text deltas"),
    ("quirks-llamacpp-length", "length", _LLAMA, _CUT, "cut by the limit, reported completed"),
    ("quirks-llamacpp-error", "error", _LLAMA, None, "text, then a bare {\"error\"} frame; no end"),
)
# fmt: on

#: One answer with everything a resume must not lose: a reasoning summary, the
#: ``tools`` scenario's two parallel calls (their deltas interleaved), then a
#: message with multibyte text (an emoji's ZWJ sequence split across deltas)
#: and a JSON-ish payload with escaped quotes, backslashes and a newline.
_MIXED = ResponseScenario(
    name="mixed",
    summary="reasoning, two parallel get_weather calls, then text with JSON",
    reasoning=(
        "Two cities: call get_weather ",
        "for both at once, then ",
        "report — in °C, with a JSON copy.",
    ),
    tool_calls=SCENARIOS["tools"].tool_calls,
    calls_first=True,
    content=(
        "Paris: 18 °C, 東京: 22 °C 🌤. Checked by 👩",
        "\u200d💻. As JSON: ",
        '{"paris": {"temp": 18, "note": "a \\"mild\\" day"}, ',
        '"東京": {"temp": 22, "path": "C:\\\\天気\\\\晴れ", "lines": "a\\nb"}}',
    ),
    output_tokens=71,
    reasoning_tokens=23,
)


def png(width: int, height: int, rgb: tuple[int, int, int]) -> str:
    """A valid PNG of one colour, base64: what an image generation call's images are."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    rows = b"".join(b"\0" + bytes(rgb) * width for _ in range(height))
    data = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(data).decode()


def _hosted(name: str, summary: str, *items: ToolItem, **fields: Any) -> ResponseScenario:
    """A scenario whose tool items run before a short message (its words in ``fields``)."""
    return ResponseScenario(name=name, summary=summary, tool_items=items, **fields)


_SEARCH_TEXT = ("Paris is 18 °C today, ", "says Météo-France.", " Take a light coat.")
_FORECAST = "https://meteofrance.example/paris"
_MCP_TOOLS = [
    {
        "name": "get_forecast",
        "description": "The forecast for a city",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
        "annotations": {"read_only": True},
    }
]
_PATCH = (
    "*** Begin Patch\n*** Update File: weather.py\n",
    "@@ def unit():\n-    return ",
    '"fahrenheit"\n+    return "celsius"\n',
    "*** End Patch",
)

_HOSTED = (
    _hosted(
        "web-search",
        "a web_search_call (in_progress, searching, completed), then text with a url_citation",
        ToolItem(
            type="web_search_call",
            id="ws_chunkwise",
            before=("in_progress", "searching", "completed"),
            fields={"status": "completed", "action": {"type": "search", "query": "Paris weather"}},
            pending={"status": "in_progress", "action": {"type": "search"}},
        ),
        content=_SEARCH_TEXT,
        citations=(Citation(url=_FORECAST, title="Météo Paris", cited="says Météo-France."),),
        output_tokens=31,
    ),
    _hosted(
        "file-search",
        "a file_search_call (in_progress, searching, completed) with its results, then text",
        ToolItem(
            type="file_search_call",
            id="fs_chunkwise",
            before=("in_progress", "searching", "completed"),
            fields={
                "status": "completed",
                "queries": ["unit of temperature"],
                "results": [
                    {
                        "file_id": "file-chunkwise",
                        "filename": "style.md",
                        "score": 0.92,
                        "text": "Temperatures are given in °C.",
                        "attributes": {},
                    }
                ],
            },
            pending={"status": "in_progress", "queries": [], "results": None},
        ),
        content=("The style guide says: ", "temperatures in °C."),
        output_tokens=14,
    ),
    _hosted(
        "code-interpreter",
        "a code_interpreter_call: in_progress, its code in deltas, interpreting, completed",
        ToolItem(
            type="code_interpreter_call",
            id="ci_chunkwise",
            before=("in_progress",),
            fragments=("celsius = (64", " - 32) * 5 / 9\n", "print(round(celsius", ", 1))"),
            after=("interpreting", "completed"),
            fields={
                "status": "completed",
                "container_id": "cntr_chunkwise",
                "outputs": [{"type": "logs", "logs": "17.8\n"}],
            },
            pending={"status": "in_progress", "outputs": None},
        ),
        content=("64 °F is ", "17.8 °C."),
        output_tokens=40,
    ),
    _hosted(
        "image-generation",
        "an image_generation_call: in_progress, generating, two partial PNGs, the final one",
        ToolItem(
            type="image_generation_call",
            id="ig_chunkwise",
            before=("in_progress", "generating"),
            partial_images=(png(2, 2, (40, 40, 90)), png(2, 2, (90, 140, 200))),
            after=("completed",),
            fields={
                "status": "completed",
                "result": png(2, 2, (120, 180, 240)),
                "output_format": "png",
                "quality": "low",
                "background": "opaque",
                "revised_prompt": "A clear blue sky over Paris",
            },
            pending={"status": "in_progress", "result": None},
        ),
        content=("Here is the sky ", "over Paris."),
        output_tokens=12,
    ),
    _hosted(
        "mcp",
        "mcp_list_tools, then an mcp_call whose JSON arguments stream; its output",
        ToolItem(
            type="mcp_list_tools",
            id="mcpl_chunkwise",
            before=("in_progress", "completed"),
            fields={"server_label": "weather", "tools": _MCP_TOOLS},
            pending={"tools": []},
        ),
        ToolItem(
            type="mcp_call",
            id="mcp_chunkwise",
            before=("in_progress",),
            fragments=('{"ci', 'ty": "Zü', 'rich", "da', 'ys": 2}'),
            after=("completed",),
            fields={
                "server_label": "weather",
                "name": "get_forecast",
                "approval_request_id": None,
                "error": None,
                "output": "Zürich: 12 °C, then 15 °C.",
            },
            pending={"output": None},
        ),
        content=("Zürich: 12 °C today, ", "15 °C tomorrow."),
        output_tokens=33,
    ),
    _hosted(
        "custom-tool",
        "a custom_tool_call (a GPT-5 freeform tool) whose input streams; no message",
        ToolItem(
            type="custom_tool_call",
            id="ctc_chunkwise",
            fragments=_PATCH,
            fields={
                "status": "completed",
                "call_id": "call_chunkwise_patch",
                "name": "apply_patch",
            },
            pending={"status": "in_progress"},
        ),
        output_tokens=38,
    ),
    _hosted(
        "shell",
        "a shell_call whose command streams, then its shell_call_output's stdout",
        ToolItem(
            type="shell_call",
            id="sh_chunkwise",
            fragments=("curl -s wttr", ".in/Paris", "?format=3"),
            fields={
                "status": "completed",
                "call_id": "call_chunkwise_shell",
                "action": {"timeout_ms": 10000, "max_output_length": 4096},
            },
            pending={"status": "in_progress"},
        ),
        ToolItem(
            type="shell_call_output",
            id="sho_chunkwise",
            fragments=("Paris: ", "☀️ +18°C\n"),
            fields={"status": "completed", "call_id": "call_chunkwise_shell"},
            pending={"status": "in_progress"},
        ),
        content=("It is 18 °C ", "and sunny in Paris."),
        output_tokens=27,
    ),
    ResponseScenario(
        name="audio",
        summary="spoken output: response.audio and transcript deltas beside the message's text",
        content=SPOKEN.transcript,
        audio=SPOKEN,
        output_tokens=46,
    ),
)

# The quirks last (a stable sort), as ``--help`` lists them.
_ALL_SCENARIOS = sorted(
    (
        *(
            _from_chat(SCENARIOS[chat], summary, name=name, style=style, outcome=outcome)
            for name, chat, style, outcome, summary in _TABLE
        ),
        _MIXED,
        *_HOSTED,
    ),
    key=lambda scenario: scenario.name.startswith("quirks-"),
)

#: The built-in Responses scenarios by name.
RESPONSE_SCENARIOS: Mapping[str, ResponseScenario] = {s.name: s for s in _ALL_SCENARIOS}


def answering_tool_results(scenario: ResponseScenario) -> ResponseScenario:
    """The scenario that answers a request carrying function-call results.

    A tool loop's second turn gets text, in the same dialect, as a model
    would answer, instead of the same calls again.
    """
    return RESPONSE_SCENARIOS["quirks-llamacpp" if scenario.llama_cpp else "text"]
