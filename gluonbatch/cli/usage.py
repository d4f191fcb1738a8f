"""The ``gluonbatch`` command line: parsing, the help format, and the exit code of a command
line the command cannot run.

Exit code 2 is a wrong command line: what argparse reports (with the usage of the command
or action whose arguments are wrong), and :class:`UsageError`, which an action raises for
an option value it can only check once the data is open (one line, no usage). Exit code 1
is a failure of the data or the files, printed on one line by :func:`reported`.
"""
import argparse
from collections.abc import Callable, Iterator, Sequence
from typing import TypeAlias

from .._core.argtypes import HelpFormatter
from .._core.failures import report

__all__ = ['EXIT_USAGE', 'UsageError', 'parsers', 'finish', 'parse', 'reported']

#: The exit code of a wrong command line, argparse's.
EXIT_USAGE = 2

#: The sub-parsers action of a command (what ``ArgumentParser.add_subparsers`` returns).
SubParsers: TypeAlias = argparse._SubParsersAction
#: Runs a parsed command line; returns its exit code.
Runner: TypeAlias = Callable[[argparse.Namespace], int]


class UsageError(ValueError):
    """An option value the command cannot run with, found after parsing: exit code 2."""

    exit_code = EXIT_USAGE


def _subcommands(parser):
    """The ``add_subparsers`` actions of ``parser``."""
    return [action for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)]


def parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and the parsers of all its subcommands, depth first.

    >>> from gluonbatch.cli import build_parser
    >>> [p.prog for p in parsers(build_parser())][:3]
    ['gluonbatch', 'gluonbatch demo', 'gluonbatch show']
    """
    yield parser
    for action in _subcommands(parser):
        for sub in dict.fromkeys(action.choices.values()):  # aliases share one parser
            yield from parsers(sub)


def finish(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``parser`` and every subcommand's parser the help format
    (:class:`~gluonbatch._core.argtypes.HelpFormatter`); returns ``parser``."""
    for each in parsers(parser):
        each.formatter_class = HelpFormatter
    return parser


def _chosen(parser, args):
    """The parser of the deepest subcommand ``args`` chose."""
    for action in _subcommands(parser):
        sub = action.choices.get(getattr(args, action.dest, None))
        if sub is not None:
            return _chosen(sub, args)
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """``parser.parse_args(argv)``, except that unrecognized arguments are reported with the
    usage of the subcommand they were given to, not the top-level usage. ``args.chosen``
    is that subcommand's parser, whose name and options :func:`reported` messages use.

    >>> from gluonbatch.cli import build_parser
    >>> parse(build_parser(), ['wds', 'inspect', 'data']).chosen.prog
    'gluonbatch wds inspect'
    """
    args, extras = parser.parse_known_args(argv)
    args.chosen = _chosen(parser, args)
    if extras:
        args.chosen.error('unrecognized arguments: %s' % ' '.join(extras))
    return args


def reported(args: argparse.Namespace, work: Runner) -> int:
    """``work(args)``'s exit code; an error of the data or the files is printed on one line,
    ``PROG: error: MESSAGE``, which names options by their flags, and exits 1 (2 for a
    :class:`UsageError`); see :func:`gluonbatch._core.failures.report`. ``args`` comes
    from :func:`parse`."""
    return report(args.chosen.prog, lambda: work(args), args.chosen)
