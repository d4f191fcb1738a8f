"""The ``gluonbatch`` command: ``demo``, ``bench``, ``show`` and ``wds``.

One module per command, each with ``add_parser(commands)`` and ``run``: ``demo``,
``bench``, ``show`` and ``wds`` (with ``curate``, its curation steps); the argparse value
types they share with the example loaders and the benchmark are in
``gluonbatch._core.argtypes``. ``__main__`` runs the command (``python -m gluonbatch.cli``).

>>> main(['--help'])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
SystemExit: 0
"""
import argparse
import sys

from . import bench, demo, show, wds

__all__ = ['main', 'build_parser']


def build_parser():
    """The argument parser of the ``gluonbatch`` command.

    >>> build_parser().parse_args(['show', '--loader', 'yolo']).command
    'show'
    """
    parser = argparse.ArgumentParser(
        prog='gluonbatch', description='Fast shared-memory batches for MXNet Gluon: example '
                                       'loaders, benchmark and batch pictures.')
    commands = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')
    for command in (demo, bench, show, wds):  # the order of `gluonbatch --help`
        command.add_parser(commands)
    return parser


def main(argv=None):
    """Run the command; returns its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ['bench']:
        return bench.run(argv[1:])
    args = build_parser().parse_args(argv)
    return args.run(args)
