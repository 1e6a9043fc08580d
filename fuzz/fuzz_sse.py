"""Fuzz :class:`chunkwise.SSEDecoder`: arbitrary bytes, arbitrary reads, small limits.

Run for as long as you like (needs ``pip install atheris``)::

    python fuzz/fuzz_sse.py -max_total_time=3600 fuzz/corpus/sse

What a finding means -- :func:`TestOneInput` raises when:

* the decoder raises anything but :class:`~chunkwise.errors.EventTooLarge`;
* splitting the input into different reads changes any outcome: the events,
  the last event ID, the retry value, whether bytes were left unterminated, or
  whether (and with what limit) :class:`~chunkwise.errors.EventTooLarge` was raised;
* a dispatched event is larger than ``max_event_size`` (memory is unbounded).

The test suite runs :func:`TestOneInput` on a few hundred inputs without
atheris (tests/test_fuzz.py), so the harness itself cannot rot.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _bytes import MAX_BODY, ByteReader, fuzz_main, split_reads

import chunkwise

#: Limits the fuzzer picks from: tiny ones so EventTooLarge is reached often.
LIMITS = (1, 2, 7, 16, 100, 4096, chunkwise.types.DEFAULT_MAX_EVENT_SIZE)


def outcome(reads: list[bytes], limit: int, legacy: bool) -> tuple[Any, ...]:
    decoder = chunkwise.SSEDecoder(max_event_size=limit, legacy_error_field=legacy)
    events: list[chunkwise.ServerSentEvent] = []
    error: chunkwise.errors.EventTooLarge | None = None
    try:
        for read in reads:
            events += decoder.feed(read)
        events += decoder.end()
    except chunkwise.errors.EventTooLarge as exc:
        error = exc
    if error is not None:
        assert error.limit == limit, (error.limit, limit)
        assert decoder.error is error
    for event in events:
        assert len(event.data) <= limit, "an event larger than max_event_size was dispatched"
    unterminated = decoder.unterminated if error is None else None
    return tuple(events), decoder.last_event_id, decoder.retry, unterminated, error


def TestOneInput(data: bytes) -> None:
    reader = ByteReader(data)
    limit = int(reader.choice(LIMITS))  # type: ignore[call-overload]
    legacy = bool(reader.byte() & 1)
    stream = reader.take(reader.int_below(MAX_BODY))
    reads = split_reads(reader, stream)
    assert b"".join(reads) == stream
    whole = outcome([stream], limit, legacy)
    split = outcome(reads, limit, legacy)
    assert whole == split, (whole, split)
    one_byte = outcome([stream[i : i + 1] for i in range(len(stream))], limit, legacy)
    assert whole == one_byte, (whole, one_byte)


if __name__ == "__main__":  # pragma: no cover - needs atheris
    fuzz_main(TestOneInput)
