"""Responses parts are kept in index order, whatever order they arrive in.

A message's parts are keyed by ``content_index`` and a reasoning item's
summary parts by ``summary_index`` (RESPONSES.md, "Key items by output_index,
parts by content_index"); the result lists them by index, never by arrival.
Every arrival order of three parts is tried, for both part lists, and for
each way the item can end: finished by ``output_item.done`` (whose item lists
the parts by index), left unfinished by a terminal event with no output, and
cut off with no terminal event at all.

Checked to fail when ``ItemState.to_result`` lists the parts as they arrived
(``self.content.values()`` instead of ``sorted(self.content)``).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from chunkwise import responses
from helpers.bodies import numbered, response_object
from helpers.reads import accumulate_response

#: For each part list: the item type, the index key, the part and text event names,
#: the part type.
LISTS = {
    "content": ("message", "content_index", "content_part", "output_text", "output_text"),
    "summary": (
        "reasoning",
        "summary_index",
        "reasoning_summary_part",
        "reasoning_summary_text",
        "summary_text",
    ),
}
TEXTS = ["zero ", "one ", "two"]
ORDERS = list(itertools.permutations(range(len(TEXTS))))
ENDINGS = ["item done", "terminal only", "cut off"]


def stream(which: str, order: tuple[int, ...], ending: str) -> list[dict[str, Any]]:
    """An item whose parts arrive in ``order``, each in two deltas, ending as ``ending``."""
    item_type, key, part_event, text_event, part_type = LISTS[which]
    head = {"id": "it_1", "type": item_type, "status": "in_progress", which: []}
    if item_type == "message":
        head["role"] = "assistant"
    where = {"output_index": 0, "item_id": "it_1"}
    empty = {"type": part_type, "text": ""}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response_object()},
        {"type": "response.output_item.added", "output_index": 0, "item": head},
    ]
    for i in order:
        events.append({"type": f"response.{part_event}.added", **where, key: i, "part": empty})
        events.append(
            {"type": f"response.{text_event}.delta", **where, key: i, "delta": TEXTS[i][:2]}
        )
    for i in order:  # the second halves, then each part finished, still in arrival order
        events.append(
            {"type": f"response.{text_event}.delta", **where, key: i, "delta": TEXTS[i][2:]}
        )
    for i in order:
        events.append({"type": f"response.{text_event}.done", **where, key: i, "text": TEXTS[i]})
        events.append(
            {
                "type": f"response.{part_event}.done",
                **where,
                key: i,
                "part": {**empty, "text": TEXTS[i]},
            }
        )
    if ending == "item done":
        parts = [{"type": part_type, "text": text} for text in TEXTS]  # by index, as OpenAI
        item = {**head, "status": "completed", which: parts}
        events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
    if ending != "cut off":
        events.append(
            {"type": "response.completed", "response": response_object("completed", None)}
        )
    return numbered(events)


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("order", ORDERS, ids=["".join(map(str, o)) for o in ORDERS])
@pytest.mark.parametrize("which", LISTS)
def test_parts_arriving_out_of_index_order_keep_index_order(
    which: str, order: tuple[int, ...], ending: str
) -> None:
    events, result = accumulate_response(stream(which, order, ending))
    [item] = result.output
    parts = item.content if which == "content" else item.summary
    assert [(part.index, part.text) for part in parts] == list(enumerate(TEXTS))
    if which == "content":
        assert result.output_text == "".join(TEXTS)
    done = [e for e in events if type(e) is responses.OutputItemDone]
    if ending == "item done":
        [finished] = done
        assert finished.item == item
    assert result.status == ("incomplete" if ending == "cut off" else "complete")
