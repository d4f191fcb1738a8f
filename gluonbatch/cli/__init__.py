"""The ``gluonbatch`` command: ``gluonbatch demo`` (what ``make demo`` runs), ``gluonbatch
show`` (the first batch of an example loader, drawn), ``gluonbatch wds`` (shards:
convert VOC and COCO, index, inspect, verify, embed, score, filter, reshard) and
``gluonbatch info`` (the versions in use, the optional parts installed). ``python -m
gluonbatch`` runs it too. The benchmarks are not a command: ``make bench`` runs them from a
checkout of the repository.

>>> main(['--help'])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
SystemExit: 0
"""
import argparse
import sys
from collections.abc import Sequence

from . import demo, info, show, usage, wds
from .. import __version__

__all__ = ['main', 'build_parser']


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``gluonbatch`` command.

    >>> build_parser().parse_args(['show', '--loader', 'yolo']).command
    'show'
    """
    parser = argparse.ArgumentParser(
        prog='gluonbatch', description='Fast shared-memory batches for MXNet Gluon: example '
                                       'loaders, batch pictures and webdatasets.')
    parser.add_argument('--version', action='version', version='%(prog)s ' + __version__)
    commands = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')
    for command in (demo, show, wds, info):  # the order of `gluonbatch --help`
        command.add_parser(commands)
    return usage.finish(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = usage.parse(build_parser(), argv)
    return args.run(args)
