"""Progress of Dask computations and of loops: a bar on a terminal, one line per
computation or loop elsewhere.

:func:`local_progress` watches the computations of Dask's local schedulers (threads,
synchronous); :func:`wait_with_progress` waits for the futures of a ``distributed``
client. Both choose by whether ``sys.stdout`` is a terminal. :func:`counted` shows the
progress of a loop in the driver (converting a dataset, say): a ``tqdm`` bar where
``sys.stderr``, which the bar is drawn on, is a terminal.
"""
import contextlib
import contextvars
import sys
import time

from dask.callbacks import Callback

from .._core.console import is_terminal, stage_line

__all__ = ['local_progress', 'wait_with_progress', 'StageLines', 'stage_named', 'staged',
           'counted']


# What the computation running now does, for its progress line (None: unnamed).
_STAGE = contextvars.ContextVar('gluonbatch_stage', default=None)


@contextlib.contextmanager
def stage_named(name):
    """Within this context, progress lines name the stage: ``reshard (writing shards): ...``."""
    token = _STAGE.set(name)
    try:
        yield
    finally:
        _STAGE.reset(token)


def staged(label):
    """``label`` with the name of the current stage (:func:`stage_named`), if any.

    >>> with stage_named('writing shards'):
    ...     staged('reshard')
    'reshard (writing shards)'
    """
    name = _STAGE.get()
    return label if name is None else '%s (%s)' % (label, name)


class StageLines(Callback):
    """A Dask callback that prints one line per computation when it ends, for output that is
    not a terminal: ``label: 12/12 tasks done in 0.8 s``.

    Examples
    --------
    >>> import dask
    >>> with StageLines('sum'):
    ...     _ = dask.compute(dask.delayed(sum)([1, 2]), scheduler='synchronous')
    ... # doctest: +ELLIPSIS
    sum: 1/1 task done in ... s
    """

    def __init__(self, label, out=None):
        super().__init__()
        self._label, self._out, self._started = label, out, None

    def _start(self, dsk):
        self._started = time.perf_counter()

    def _finish(self, dsk, state, errored):
        done = len(state['finished'])
        total = done + sum(len(state[k]) for k in ('ready', 'waiting', 'running'))
        print(stage_line(staged(self._label), done, total, time.perf_counter() - self._started),
              file=self._out or sys.stdout, flush=True)


@contextlib.contextmanager
def local_progress(label):
    """Within this context, Dask's local schedulers show their progress: Dask's bar on a
    terminal, else a line per computation (:class:`StageLines`) labelled ``label``."""
    if is_terminal(sys.stdout):
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            yield
    else:
        with StageLines(label):
            yield


def wait_with_progress(futures, label):
    """Wait for ``futures`` of a ``distributed`` client: ``distributed``'s bar on a
    terminal, else one line when they are done (or failed) labelled ``label``."""
    import distributed

    if is_terminal(sys.stdout):
        distributed.progress(futures)
        return
    started = time.perf_counter()
    distributed.wait(futures)
    done = sum(future.status == 'finished' for future in futures)
    print(stage_line(staged(label), done, len(futures), time.perf_counter() - started),
          flush=True)


def counted(items, label, unit='item', show=True):
    """Yield ``items`` (a sized iterable), showing how many are done when ``show``: a
    ``tqdm`` bar if ``sys.stderr`` is a terminal, else one line on ``sys.stdout`` when the
    loop ends, labelled ``label`` (and the current stage, :func:`stage_named`). A loop
    stopped by an error says so on its line.

    Examples
    --------
    >>> with stage_named('reading'):
    ...     total = sum(counted([1, 2, 3], 'convert', 'image'))
    ... # doctest: +ELLIPSIS
    convert (reading): 3/3 images done in ... s
    >>> sum(counted([1, 2], 'convert', show=False))
    3
    """
    if not show:
        yield from items
        return
    total = len(items)
    if is_terminal(sys.stderr):
        from tqdm import tqdm

        with tqdm(items, total=total, desc=staged(label), unit=unit, file=sys.stderr) as bar:
            yield from bar
        return
    started, done = time.perf_counter(), 0
    try:
        for item in items:
            yield item
            done += 1
    finally:
        print(stage_line(staged(label), done, total, time.perf_counter() - started, unit),
              flush=True)
