"""Scripted Responses API streams: the chat scenarios' words, as ``POST /v1/responses`` says them.

A :class:`ResponseScenario` is plain data saying *what* the assistant says
(reasoning, text pieces, function calls with their argument fragments) and
*how it ends* (completed, cut by ``max_output_tokens``, failed by a mid-stream
error), and a :class:`ResponseStyle` saying *how a provider writes it*: as
OpenAI documents it, or as llama.cpp's ``llama-server`` does, with keepalive
events or not, with the ``error`` event nested or flat.  The words are taken
from the chat scenarios (:data:`~chunkwise_tools.server._scenarios.SCENARIOS`), so
both APIs of the server say the same things; ``mixed`` alone has its own
words, one answer with reasoning, parallel calls and text (no chat
choice says all three).  :mod:`._response_wire` turns a
scenario into the events and bytes of a stream, by the rules written there.

Pure data: no I/O, no trio.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import attrs

from ._scenarios import SCENARIOS, Scenario, ToolCallScript

__all__ = [
    "DEFAULT_RESPONSE_SCENARIO",
    "RESPONSE_SCENARIOS",
    "ResponseScenario",
    "ResponseStyle",
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

# The quirks last (a stable sort), as ``--help`` lists them.
_ALL_SCENARIOS = sorted(
    (
        *(
            _from_chat(SCENARIOS[chat], summary, name=name, style=style, outcome=outcome)
            for name, chat, style, outcome, summary in _TABLE
        ),
        _MIXED,
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
