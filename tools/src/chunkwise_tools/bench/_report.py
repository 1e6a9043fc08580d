"""The HTML page of a ``chunkwise bench`` report: one self-contained file, SVG charts.

Theory of operation
-------------------
The page is a view of the report document (the ``--json`` one, see
:mod:`._runner`), so it shows nothing the document does not hold.  It is built
with the standard library only: text through :func:`html.escape`, charts as
inline SVG drawn here (no script, no stylesheet or font fetched), so the file
opens anywhere, offline, and can be attached to a bug report.

Rules
-----
1. Four charts, each with a title, labelled axes and round tick values: the
   TTFT and the inter-token-gap distributions (histograms), output
   throughput over time (tokens a second, each second of the run), and latency
   over time (each request's end-to-end latency and TTFT by when it was
   issued; failed requests marked apart).
2. The page is well-formed XML (XHTML-compatible markup), so tests parse it
   and every ``<svg>`` in it with :mod:`xml.etree.ElementTree`.
3. Every figure is in milliseconds on the page (seconds in the document).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["nice_ticks", "render_report", "write_report"]

_WIDTH = 560
_HEIGHT = 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 16, 52, 48

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px;
       color: #1d2330; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
p.meta { color: #556; margin: 0 0 16px; }
table { border-collapse: collapse; margin: 8px 0 20px; }
th, td { padding: 4px 12px; text-align: right; border-bottom: 1px solid #dde; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f3f5f9; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap: 16px; }
.chart { border: 1px solid #dde; border-radius: 6px; padding: 4px; }
.failed { color: #b3261e; }
"""

_BLUE = "#3366cc"
_ORANGE = "#e8710a"
_RED = "#b3261e"


def write_report(document: dict[str, Any], name: str) -> None:
    """Write the page of ``document`` to file ``name`` (UTF-8)."""
    with open(name, "w", encoding="utf-8") as file:
        file.write(render_report(document))


def render_report(document: dict[str, Any]) -> str:
    """The page of ``document``, as text."""
    e = html.escape
    load = document["load"]
    how = (
        f"at {load['rate']:g} requests/s (Poisson arrivals)"
        if load["rate"] is not None
        else f"concurrency {load['concurrency']}"
    )
    model = f", model {document['model']}" if document.get("model") else ""
    counts = document["requests"]
    failed = sum(counts["failed"].values())
    parts = [
        "<!DOCTYPE html>",
        '<html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head><meta charset="utf-8"/>',
        "<title>chunkwise bench</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>chunkwise bench</h1>",
        f'<p class="meta">{e(document["endpoint"])} ({e(document["api"])}{e(model)}), '
        f"{e(how)}; {counts['total']} requests in {document['elapsed']:.2f} s"
        f"{' (interrupted: those that finished)' if document.get('interrupted') else ''}</p>",
        "<table><thead><tr><th>requests</th><th>ok</th><th>failed</th><th>requests/s</th>"
        "<th>output tokens/s</th></tr></thead><tbody>",
        f"<tr><td>{counts['total']}</td><td>{counts['ok']}</td>"
        f'<td class="{"failed" if failed else ""}">{failed}</td>'
        f"<td>{document['requests_per_second']:.2f}</td>"
        f"<td>{document['output_tokens_per_second']:.1f}</td></tr></tbody></table>",
    ]
    if counts["failed"]:
        parts.append(
            "<table><thead><tr><th>failed by kind</th><th>requests</th></tr></thead><tbody>"
        )
        for kind, count in sorted(counts["failed"].items(), key=lambda item: -item[1]):
            parts.append(f'<tr><td class="failed">{e(kind)}</td><td>{count}</td></tr>')
        parts.append("</tbody></table>")
    parts.append(
        "<table><thead><tr><th>milliseconds</th><th>count</th><th>mean</th><th>p50</th>"
        "<th>p90</th><th>p99</th><th>max</th></tr></thead><tbody>"
    )
    for label, key in (
        ("time to first token (TTFT)", "ttft"),
        ("time per output token (TPOT)", "tpot"),
        ("inter-token gap", "inter_token_gap"),
        ("end-to-end latency", "latency"),
    ):
        stats = document[key]
        if stats is None:
            parts.append(f"<tr><td>{label}</td><td>0</td>" + "<td>-</td>" * 5 + "</tr>")
            continue
        cells = "".join(
            f"<td>{stats[name] * 1000:.2f}</td>" for name in ("mean", "p50", "p90", "p99", "max")
        )
        parts.append(f"<tr><td>{label}</td><td>{stats['count']}</td>{cells}</tr>")
    parts.append("</tbody></table>")
    reads = document["reads"]
    parts.append(
        f'<p class="meta">{reads["output"]} reads carried output, '
        f"{reads['several_outputs']} of them more than one output event "
        "(tokens that came in one read are one gap)</p>"
    )
    parts.append('<div class="charts">')
    histograms = document["histograms"]
    parts.append(_histogram_chart("TTFT distribution", histograms["ttft"], "TTFT (ms)"))
    parts.append(
        _histogram_chart("Inter-token gap distribution", histograms["inter_token_gap"], "gap (ms)")
    )
    parts.append(_throughput_chart(document["per_second"]))
    parts.append(_latency_chart(document["samples"]))
    parts.append("</div></body></html>\n")
    return "\n".join(parts)


# -- charts ----------------------------------------------------------------------


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering ``[low, high]`` (1, 2 or 5 times a power of ten apart)."""
    if not math.isfinite(low) or not math.isfinite(high) or high <= low:
        high = low + 1.0
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    start = math.floor(low / step) * step
    ticks = []
    value = start
    while value < high + step * 0.999:
        ticks.append(round(value, 12))
        value += step
    return ticks


def _label(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 or value == int(value) else f"{value:g}"


class _Frame:
    """A chart's plot area: data ranges mapped onto the SVG's pixels."""

    def __init__(self, x_ticks: Sequence[float], y_ticks: Sequence[float]) -> None:
        self.x_ticks, self.y_ticks = x_ticks, y_ticks
        self.x0, self.x1 = x_ticks[0], x_ticks[-1]
        self.y0, self.y1 = y_ticks[0], y_ticks[-1]

    def x(self, value: float) -> float:
        span = _WIDTH - _LEFT - _RIGHT
        return _LEFT + (value - self.x0) / ((self.x1 - self.x0) or 1) * span

    def y(self, value: float) -> float:
        span = _HEIGHT - _TOP - _BOTTOM
        return _HEIGHT - _BOTTOM - (value - self.y0) / ((self.y1 - self.y0) or 1) * span


def _svg(title: str, frame: _Frame | None, x_label: str, y_label: str, body: Iterator[str]) -> str:
    e = html.escape
    out = [
        f'<div class="chart"><svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" '
        f'height="{_HEIGHT}" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
        f'aria-label="{e(title)}" font-size="12" font-family="system-ui, sans-serif">',
        f"<title>{e(title)}</title>",
        f'<text x="{_WIDTH / 2}" y="20" text-anchor="middle" font-size="15" '
        f'font-weight="600">{e(title)}</text>',
    ]
    if frame is None:
        out.append(
            f'<text x="{_WIDTH / 2}" y="{_HEIGHT / 2}" text-anchor="middle" fill="#778">'
            "no data</text>"
        )
    else:
        bottom, top = _HEIGHT - _BOTTOM, _TOP
        for tick in frame.y_ticks:
            y = frame.y(tick)
            out.append(
                f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
                'stroke="#e6e8ee"/>'
            )
            out.append(
                f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#445">'
                f"{_label(tick)}</text>"
            )
        for tick in frame.x_ticks:
            x = frame.x(tick)
            out.append(
                f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{bottom}" y2="{bottom + 5}" stroke="#445"/>'
            )
            out.append(
                f'<text x="{x:.1f}" y="{bottom + 18}" text-anchor="middle" fill="#445">'
                f"{_label(tick)}</text>"
            )
        out.extend(body)
        out.append(
            f'<line x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{bottom}" y2="{bottom}" stroke="#445"/>'
        )
        out.append(f'<line x1="{_LEFT}" x2="{_LEFT}" y1="{top}" y2="{bottom}" stroke="#445"/>')
    out.append(
        f'<text x="{(_LEFT + _WIDTH - _RIGHT) / 2}" y="{_HEIGHT - 10}" text-anchor="middle" '
        f'fill="#223">{e(x_label)}</text>'
    )
    middle = (_TOP + _HEIGHT - _BOTTOM) / 2
    out.append(
        f'<text x="16" y="{middle}" text-anchor="middle" fill="#223" '
        f'transform="rotate(-90 16 {middle})">{e(y_label)}</text>'
    )
    out.append("</svg></div>")
    return "\n".join(out)


def _histogram_chart(title: str, histogram: dict[str, Any] | None, x_label: str) -> str:
    if histogram is None:
        return _svg(title, None, x_label, "requests", iter(()))
    edges = [edge * 1000 for edge in histogram["edges"]]
    counts = histogram["counts"]
    frame = _Frame(nice_ticks(edges[0], edges[-1]), nice_ticks(0, max(counts) or 1))

    def bars() -> Iterator[str]:
        for left, right, count in zip(edges, edges[1:], counts, strict=False):
            if not count:
                continue
            x0, x1 = frame.x(left), frame.x(right)
            y = frame.y(count)
            yield (
                f'<rect x="{x0:.1f}" y="{y:.1f}" width="{max(x1 - x0 - 1, 1):.1f}" '
                f'height="{frame.y(0) - y:.1f}" fill="{_BLUE}"><title>{left:.2f}-{right:.2f} '
                f"ms: {count}</title></rect>"
            )

    return _svg(title, frame, x_label, "count", bars())


def _throughput_chart(per_second: dict[str, list[float]]) -> str:
    title = "Output throughput over time"
    seconds_ = per_second["second"]
    tokens = per_second["output_tokens"]
    if not any(tokens):
        return _svg(title, None, "time since start (s)", "output tokens/s", iter(()))
    frame = _Frame(nice_ticks(0, len(seconds_)), nice_ticks(0, max(tokens)))

    def line() -> Iterator[str]:
        points = [(frame.x(s + 0.5), frame.y(t)) for s, t in zip(seconds_, tokens, strict=True)]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        base = frame.y(0)
        area = f"{points[0][0]:.1f},{base:.1f} {path} {points[-1][0]:.1f},{base:.1f}"
        yield f'<polygon points="{area}" fill="{_BLUE}" fill-opacity="0.15"/>'
        yield f'<polyline points="{path}" fill="none" stroke="{_BLUE}" stroke-width="2"/>'
        for (x, y), t in zip(points, tokens, strict=True):
            yield (
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{_BLUE}">'
                f"<title>{t:g} tokens/s</title></circle>"
            )

    return _svg(title, frame, "time since start (s)", "output tokens/s", line())


def _latency_chart(samples: list[dict[str, Any]]) -> str:
    title = "Latency over time"
    x_label = "request issued at (s since start)"
    shown = [s for s in samples if s["latency"] is not None or not s["ok"]]
    values = [s["latency"] * 1000 for s in shown if s["latency"] is not None]
    if not shown:
        return _svg(title, None, x_label, "milliseconds", iter(()))
    starts = [s["start"] for s in shown]
    frame = _Frame(nice_ticks(0, max(starts) or 1), nice_ticks(0, max(values, default=1)))

    def dots() -> Iterator[str]:
        for sample in shown:
            x = frame.x(sample["start"])
            if not sample["ok"]:
                y = frame.y(0)
                yield (
                    f'<path d="M{x - 3:.1f},{y - 3:.1f} l6,6 m0,-6 l-6,6" stroke="{_RED}" '
                    f'stroke-width="1.5"><title>failed: {html.escape(str(sample["error"]))}'
                    "</title></path>"
                )
                continue
            latency = sample["latency"] * 1000
            yield (
                f'<circle cx="{x:.1f}" cy="{frame.y(latency):.1f}" r="2.5" fill="{_BLUE}" '
                f'fill-opacity="0.7"><title>latency {latency:.1f} ms</title></circle>'
            )
            if sample["ttft"] is not None:
                ttft = sample["ttft"] * 1000
                yield (
                    f'<circle cx="{x:.1f}" cy="{frame.y(ttft):.1f}" r="2.5" fill="{_ORANGE}" '
                    f'fill-opacity="0.7"><title>TTFT {ttft:.1f} ms</title></circle>'
                )
        x = _LEFT + 8
        for color, text in ((_BLUE, "end-to-end latency"), (_ORANGE, "TTFT"), (_RED, "failed")):
            yield f'<circle cx="{x}" cy="{_TOP - 12}" r="4" fill="{color}"/>'
            yield f'<text x="{x + 8}" y="{_TOP - 8}" fill="#334">{text}</text>'
            x += 8 * len(text) + 28

    return _svg(title, frame, x_label, "milliseconds", dots())
