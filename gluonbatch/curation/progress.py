"""Progress of Dask computations, on ``sys.stderr`` (``sys.stdout`` keeps the results): a
bar on a terminal, one line per computation elsewhere.

:func:`local_progress` watches the computations of Dask's local schedulers (threads,
synchronous); :func:`wait_with_progress` waits for the futures of a ``distributed``
client. Both choose by whether ``sys.stderr`` is a terminal, and name the current stage
(``reshard (writing shards): ...``).
"""
import contextlib
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from dask.callbacks import Callback

from .._core.console import is_terminal, stage_line, staged

__all__ = ['local_progress', 'wait_with_progress', 'StageLines']


class StageLines(Callback):
    """A Dask callback that prints one line per computation when it ends, on ``out``
    (default ``sys.stderr``), for output that is not a terminal:
    ``label: 12/12 tasks done in 0.8 s``.

    Examples
    --------
    >>> import dask
    >>> with StageLines('sum', sys.stdout):
    ...     _ = dask.compute(dask.delayed(sum)([1, 2]), scheduler='synchronous')
    ... # doctest: +ELLIPSIS
    sum: 1/1 task done in ... s
    """

    def __init__(self, label: str, out: TextIO | None = None) -> None:
        super().__init__()
        self._label, self._out = label, out
        self._started: float | None = None

    def _start(self, dsk):
        self._started = time.perf_counter()

    def _finish(self, dsk, state, errored):
        done = len(state['finished'])
        total = done + sum(len(state[k]) for k in ('ready', 'waiting', 'running'))
        print(stage_line(staged(self._label), done, total, time.perf_counter() - self._started),
              file=self._out or sys.stderr, flush=True)


@contextlib.contextmanager
def local_progress(label: str) -> Iterator[None]:
    """Within this context, Dask's local schedulers show their progress on ``sys.stderr``:
    Dask's bar on a terminal, else a line per computation (:class:`StageLines`) labelled
    ``label``."""
    if is_terminal(sys.stderr):
        from dask.diagnostics import ProgressBar

        with ProgressBar(out=sys.stderr):
            yield
    else:
        with StageLines(label):
            yield


def wait_with_progress(futures: Sequence[Any], label: str) -> None:
    """Wait for ``futures`` of a ``distributed`` client, showing the progress on
    ``sys.stderr``: ``distributed``'s bar on a terminal, else one line when they are done
    (or failed) labelled ``label``."""
    import distributed

    if is_terminal(sys.stderr):
        # distributed's text bar writes to sys.stdout, which keeps the results
        with contextlib.redirect_stdout(sys.stderr):
            distributed.progress(futures)
        return
    started = time.perf_counter()
    distributed.wait(futures)
    done = sum(future.status == 'finished' for future in futures)
    print(stage_line(staged(label), done, len(futures), time.perf_counter() - started),
          file=sys.stderr, flush=True)
