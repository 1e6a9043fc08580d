"""The events of a legacy completions stream (beside the shared lifecycle events).

The choice family: :class:`TextDelta`, then the shared
:class:`~chunkwise.completions.ChoiceFinished`.  :data:`Event` is every event a
completions stream's subscriber may receive.
"""

from __future__ import annotations

from typing import ClassVar, TypeAlias

import attrs

from .._core.events import ChoiceFinished, Event, Family, LifecycleEvent, RawEvent

__all__ = ["CompletionEvent", "TextDelta"]


@attrs.frozen(kw_only=True)
class TextDelta(Event):
    """Text appended to a legacy completion choice's ``text``, exactly as sent."""

    family: ClassVar[Family] = "choice"
    is_output: ClassVar[bool] = True
    is_content: ClassVar[bool] = True

    choice_index: int
    text: str


#: Every event a completions stream's subscriber may receive.
CompletionEvent: TypeAlias = TextDelta | ChoiceFinished | LifecycleEvent | RawEvent
