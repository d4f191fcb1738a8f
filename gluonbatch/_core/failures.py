"""Errors of the data on one line: what the ``gluonbatch`` command and the example loaders
do with a bad file (a truncated tar, a broken XML, an empty JPEG...).

A command runs its work through :func:`report`: an error of the data is printed as one line,
``PROG: error: MESSAGE; NOTE; ...``, naming the file, and the command exits with code 1
(or the error's own ``exit_code``); any other error (an ``AttributeError`` or a
``KeyError`` of the code itself) keeps its traceback. Code that reads a file wraps the read
in :func:`reading`, whose note names the file where the error does not.

Examples
--------
>>> def work():
...     with reading('/data/000001.xml'):
...         raise ET.ParseError('no element found: line 5, column 0')
>>> import contextlib, sys
>>> with contextlib.redirect_stderr(sys.stdout):
...     code = report('convert', work)
convert: error: no element found: line 5, column 0; while reading /data/000001.xml
>>> code
1
"""
import argparse
import ast
import contextlib
import os
import re
import shlex
import sys
import traceback
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator

from mxnet.base import MXNetError

from .typing import PathLike

__all__ = ['DATA_ERRORS', 'reading', 'is_data_error', 'one_line', 'in_flag_spelling',
           'report']

#: The errors a bad file or a bad value raises; an ``MXNetError`` counts only with a note
#: of :func:`reading` (a decode that failed), not from a computation.
DATA_ERRORS: tuple[type[BaseException], ...] = (ValueError, TypeError, OSError, ImportError,
                                                ET.ParseError)

_READING = 'while reading '


@contextlib.contextmanager
def reading(*paths: PathLike) -> Iterator[None]:
    """Within this context, an exception gets the note ``while reading PATH`` (several paths
    joined by ``or``) unless its message names the path already; its type and data stay."""
    try:
        yield
    except Exception as err:
        names = [os.fspath(path) for path in paths]
        if not any(name in str(err) for name in names):
            note = _READING + ' or '.join(map(str, names))
            if note not in getattr(err, '__notes__', ()):
                err.add_note(note)
        raise


def is_data_error(error: BaseException) -> bool:
    """Whether ``error`` is an error of the data, which :func:`report` prints on one line.

    >>> is_data_error(ValueError('x')), is_data_error(KeyError('x'))
    (True, False)
    """
    if isinstance(error, MXNetError):
        return any(note.startswith(_READING) for note in getattr(error, '__notes__', ()))
    return isinstance(error, DATA_ERRORS)


def one_line(error: BaseException) -> str:
    """``error``'s message and notes on one line, joined by ``;``.

    A message that carries a traceback (MXNet's do) gives its last line, and a note of
    several lines (the traceback a DataLoader worker adds) its first.

    >>> err = ValueError('a.tar is truncated')
    >>> err.add_note('in DataLoader worker process 7:\\nTraceback (most recent call last):')
    >>> one_line(err)
    'a.tar is truncated; in DataLoader worker process 7'
    """
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if lines and lines[0].startswith('Traceback'):
        lines = lines[-1:]
    message = ' '.join(lines) or type(error).__name__
    if message.startswith('MXNetError: '):
        message = message[len('MXNetError: '):]
    for note in getattr(error, '__notes__', ()):
        first = str(note).strip().split('\n', 1)[0].rstrip(':')
        if first:
            message += '; ' + first
    return message


def _option_flags(parser):
    """The options of ``parser`` that take a value: dest -> its longest flag."""
    return {action.dest: max(action.option_strings, key=len) for action in parser._actions
            if action.option_strings and action.nargs != 0}


def in_flag_spelling(text: str, parser: argparse.ArgumentParser) -> str:
    """``text`` with each ``name='value'`` (or ``name=value``, ``name=['a', 'b']``) of an
    option of ``parser`` written as its flag, ``--name value``, and each bare name of two
    words or more (``max_shards``) as its flag: a library's message as the command's user
    types it. Names within a path (``/data/splits=old/``) are left alone.

    >>> parser = argparse.ArgumentParser()
    >>> _ = parser.add_argument('--invalid-boxes')
    >>> _ = parser.add_argument('--max-shards')
    >>> in_flag_spelling("so does invalid_boxes='drop'; boxes=2", parser)
    'so does --invalid-boxes drop; boxes=2'
    >>> in_flag_spelling('raise max_shards; see /runs/invalid_boxes=drop/a.log', parser)
    'raise --max-shards; see /runs/invalid_boxes=drop/a.log'
    """
    flags = _option_flags(parser)
    if not flags:
        return text
    names = '|'.join(map(re.escape, sorted(flags, key=len, reverse=True)))
    # not within a word, a dotted name or a path
    outside = r"(?<![\w./\\-])"
    pattern = re.compile(outside + r"(%s)=('[^']*'|\"[^\"]*\"|\[[^\]]*\]|[^\s,;)\]]+)(?![\w/])"
                         % names)
    words = [name for name in flags if '_' in name]
    bare = re.compile(outside + r"(%s)(?![\w=/.-])" % '|'.join(
        map(re.escape, sorted(words, key=len, reverse=True)))) if words else None

    def spelled(match):
        try:
            value = ast.literal_eval(match.group(2))
        except (ValueError, SyntaxError):
            value = match.group(2)
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(each, (str, int, float)) for each in values):
            return match.group(0)
        return ' '.join([flags[match.group(1)]] + [shlex.quote(str(each)) for each in values])

    text = pattern.sub(spelled, text)
    return bare.sub(lambda match: flags[match.group(1)], text) if bare else text


def report(prog: str, work: Callable[[], int],
           parser: argparse.ArgumentParser | None = None) -> int:
    """``work()``'s exit code; an error of the data (:func:`is_data_error`) is printed on
    one line on ``sys.stderr``, ``PROG: error: MESSAGE``, and gives the exit code 1, or the
    error's ``exit_code`` attribute. With ``parser`` (the command's), the message names its
    options by their flags (:func:`in_flag_spelling`). Other errors propagate."""
    try:
        return work()
    except Exception as err:
        if not is_data_error(err):
            raise
        # let the failed work's frames go first: a progress loop they held closes, and its
        # line ('... (stopped by an error)') comes before this one
        traceback.clear_frames(err.__traceback__)
        message = one_line(err)
        if parser is not None:
            message = in_flag_spelling(message, parser)
        print('%s: error: %s' % (prog, message), file=sys.stderr, flush=True)
        return getattr(err, 'exit_code', 1)
