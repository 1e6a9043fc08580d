"""The bench machinery behind ``chunkwise bench``: the runner and its report.

* :mod:`._runner`: a :class:`BenchPlan` run (:func:`run_plan`) into a
  :class:`RunState`, and the report document (:func:`bench_document`) with
  its text view (:func:`describe_document`);
* :mod:`._report`: the document's self-contained HTML page
  (:func:`render_report`, :func:`write_report`).

The scripts under ``bench/`` at the repository's root measure the library
itself; they import this package and :mod:`chunkwise_tools.server` only
through their faces.
"""

from ._report import nice_ticks, render_report, write_report
from ._runner import (
    GIVE_UP_AFTER,
    BenchPlan,
    RequestRecord,
    RunState,
    bench_document,
    describe_document,
    progress_line,
    quantiles,
    reads_line,
    run_plan,
)

__all__ = [
    "GIVE_UP_AFTER",
    "BenchPlan",
    "RequestRecord",
    "RunState",
    "bench_document",
    "describe_document",
    "nice_ticks",
    "progress_line",
    "quantiles",
    "reads_line",
    "render_report",
    "run_plan",
    "write_report",
]
