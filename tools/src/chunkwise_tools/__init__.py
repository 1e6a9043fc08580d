"""chunkwise-tools: the ``chunkwise`` command line, the OpenAI-compatible emulator and bench.

Built on the library's public faces only (:mod:`chunkwise`,
:mod:`chunkwise.testing` and :mod:`chunkwise.lowlevel`), released with it at
the same version:

* :mod:`chunkwise_tools.cli`: the ``chunkwise`` console script, one module a
  command (demo, chat, serve, record, inspect, probe, bench);
* :mod:`chunkwise_tools.server`: the emulator behind ``chunkwise serve``;
* :mod:`chunkwise_tools.bench`: the bench runner and its report.
"""

from ._version import __version__

__all__ = ["__version__"]
