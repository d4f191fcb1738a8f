"""Where output goes: a terminal gets live progress bars, anything else (a CI log, a file, a
pipe) a line per finished stage, since a bar's ``\\r`` redraws only clutter a file."""
import sys

__all__ = ['is_terminal', 'stage_line']


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
