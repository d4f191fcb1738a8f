"""argparse value types and help format: the check policy for values given on the command
line, and what ``--help`` shows (the ``gluonbatch`` command, the example loaders and the
benchmark)."""
import argparse
import os
import re

__all__ = ['positive_int', 'non_negative_int', 'int_from', 'positive_float', 'png_path',
           'HelpFormatter', 'plain_text']


def _whole_number(text, minimum, wrong):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError('%r is not a whole number' % text) from None
    if value < minimum:
        raise argparse.ArgumentTypeError('%d is %s' % (value, wrong))
    return value


def positive_int(text):
    """An int >= 1, for argparse ``type=``.

    >>> positive_int('3')
    3
    """
    return _whole_number(text, 1, 'not positive')


def non_negative_int(text):
    """An int >= 0, for argparse ``type=``.

    >>> non_negative_int('0')
    0
    """
    return _whole_number(text, 0, 'negative')


def int_from(minimum, maximum):
    """An argparse ``type=`` for an int from ``minimum`` to ``maximum`` (both included),
    whose error names the range instead of listing every choice.

    >>> workers = int_from(0, 64)
    >>> workers('2')
    2
    >>> workers('-1')
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected an int from 0 to 64, got -1
    """
    def int_in_range(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError('expected an int from %d to %d, got %s' % (
                minimum, maximum, text if value is not None else repr(text)))
        return value

    return int_in_range


def positive_float(text):
    """A finite float > 0, for argparse ``type=``.

    >>> positive_float('1e-3')
    0.001
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError('%r is not a number' % text) from None
    if not 0 < value < float('inf'):
        raise argparse.ArgumentTypeError('%s is not a positive finite number' % text)
    return value


def png_path(text):
    """A PNG file that can be written: ends in ``.png``, in an existing, writable directory,
    and not a directory itself; for argparse ``type=``, so a bad ``-o`` stops the command
    before it does any work.

    >>> png_path('batch.png')
    'batch.png'
    >>> png_path('batch.txt')
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'batch.txt' does not end in .png; the picture is a PNG file
    """
    folder = os.path.dirname(os.path.abspath(text))
    if os.path.isdir(text):
        problem = 'is a directory; name a file in it, e.g. %s' % os.path.join(text, 'batch.png')
    elif os.path.splitext(text)[1].lower() != '.png':
        problem = 'does not end in .png; the picture is a PNG file'
    elif not os.path.isdir(folder):
        problem = 'is in %s, which is not an existing directory' % folder
    else:
        problem = _unwritable(text)
        if problem is None:
            return text
    raise argparse.ArgumentTypeError('%r %s' % (text, problem))


def _unwritable(path):
    """Why the file ``path`` cannot be written, or None: it is opened for appending (which
    changes nothing in a file that exists, and one made for the test is removed), since
    permissions alone do not tell (a superuser, ``/proc``, a read-only mount)."""
    existed = os.path.exists(path)
    try:
        with open(path, 'ab'):
            pass
    except OSError as err:
        return 'cannot be written (%s); choose another path' % (err.strerror or err)
    if not existed:
        os.remove(path)
    return None


# reStructuredText in docstrings: ``literal`` and :role:`target` (``~`` keeps the last name)
_LITERAL = re.compile(r'``(.+?)``')
_ROLE = re.compile(r':[a-z]+(?::[a-z]+)?:`(~?)([^`]+)`')


def plain_text(text):
    """``text`` without reStructuredText markup, as a terminal shows help.

    >>> plain_text("run ``make bench``; see :class:`~gluonbatch.batchify.Pad`")
    'run make bench; see Pad'
    """
    text = _ROLE.sub(lambda m: m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2),
                     text)
    return _LITERAL.sub(r'\1', text)


class HelpFormatter(argparse.HelpFormatter):
    """``--help`` with each option's default after its help (where the help does not say it
    already), and plain text for the reStructuredText of docstrings.

    Flags (``True``/``False`` defaults) and options without a default show none.

    >>> parser = argparse.ArgumentParser(prog='p', description='a ``literal``',
    ...                                  formatter_class=HelpFormatter)
    >>> _ = parser.add_argument('--size', type=int, default=8, help='batch size')
    >>> print(parser.format_help())  # doctest: +NORMALIZE_WHITESPACE
    usage: p [-h] [--size SIZE]
    a literal
    options:
      -h, --help   show this help message and exit
      --size SIZE  batch size (default: 8)
    """

    def _get_help_string(self, action):
        text = plain_text(action.help or '')
        default = action.default
        if (action.option_strings and default is not None and default is not argparse.SUPPRESS
                and not isinstance(default, bool) and 'default' not in text):
            text += ' (default: %(default)s)'
        return text

    def _format_text(self, text):
        return super()._format_text(plain_text(text))
