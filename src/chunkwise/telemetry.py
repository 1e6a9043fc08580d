"""OpenTelemetry, optional: ``pip install chunkwise[otel]``, then :func:`instrument`.

See :doc:`/telemetry`.

Nothing here imports opentelemetry until :func:`instrument` is called, and
nothing else in chunkwise imports it at all: without telemetry asked for, a
program never loads it.
"""

from __future__ import annotations

from typing import Any

from ._core.names import public_face
from ._core.telemetry import LEGACY_METRICS, METRICS, Telemetry
from ._core.version import __version__

__all__ = ["Telemetry", "instrument"]


def instrument(
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    legacy_names: bool = False,
    provider_name: str = "openai",
) -> Telemetry:
    """Telemetry for the streams of ``chunkwise.Endpoint(..., telemetry=instrument())``.

    Args:
        tracer_provider: where the spans go; ``None``: opentelemetry's global one.
        meter_provider: where the metrics go; ``None``: opentelemetry's global one.
        legacy_names: the metric names of semantic-conventions v1.41.0
            (``gen_ai.client.operation.*``, ``gen_ai.client.token.usage``)
            instead of the GenAI conventions' current ``gen_ai.client.inference.*``.
        provider_name: ``gen_ai.provider.name``: the server's provider when it
            is not OpenAI (``"groq"``, ``"deepseek"``...).

    Raises:
        ModuleNotFoundError: opentelemetry-api is not installed (``chunkwise[otel]``).
    """
    # The optional extra, imported only when telemetry is asked for.
    from opentelemetry import metrics, trace

    tracer = trace.get_tracer("chunkwise", __version__, tracer_provider)
    meter = metrics.get_meter("chunkwise", __version__, meter_provider)
    return Telemetry(
        tracer,
        meter,
        names=LEGACY_METRICS if legacy_names else METRICS,
        provider_name=provider_name,
        client_kind=trace.SpanKind.CLIENT,
        error_status=trace.StatusCode.ERROR,
    )


public_face(globals())
