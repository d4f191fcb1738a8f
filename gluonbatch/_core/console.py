"""Where output goes: progress goes to ``sys.stderr``, a live bar on a terminal and
anywhere else (a CI log, a file, a pipe) a line per finished stage, since a bar's ``\\r``
redraws only clutter a file; ``sys.stdout`` keeps the results, so that
``DST=$(gluonbatch wds from-voc ...)`` captures only them.

:func:`counted` shows the progress of a loop in the driver (converting a dataset, say): a
``tqdm`` bar where ``sys.stderr``, which the bar is drawn on, is a terminal.
"""
import contextlib
import contextvars
import sys
import time

__all__ = ['is_terminal', 'stage_line', 'stage_named', 'staged', 'counted']


def is_terminal(stream=None):
    """Whether ``stream`` (default ``sys.stdout``) is an interactive terminal.

    >>> import io
    >>> is_terminal(io.StringIO())
    False
    """
    stream = sys.stdout if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        return False


def stage_line(label, done, total, seconds, unit='task'):
    """The line a finished stage prints where there is no terminal.

    >>> stage_line('embed', 12, 12, 0.84)
    'embed: 12/12 tasks done in 0.8 s'
    >>> stage_line('filter', 2, 3, 1.25)
    'filter: 2/3 tasks done in 1.2 s (stopped by an error)'
    """
    return '%s: %d/%d %s done in %.1f s%s' % (
        label, done, total, unit if total == 1 else unit + 's', seconds,
        '' if done == total else ' (stopped by an error)')


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


def counted(items, label, unit='item', show=True):
    """Yield ``items`` (a sized iterable), showing how many are done when ``show``: a
    ``tqdm`` bar if ``sys.stderr`` is a terminal, else one line on ``sys.stderr`` when the
    loop ends, labelled ``label`` (and the current stage, :func:`stage_named`). A loop
    stopped by an error says so on its line.

    Examples
    --------
    >>> with stage_named('reading'), contextlib.redirect_stderr(sys.stdout):
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
              file=sys.stderr, flush=True)
