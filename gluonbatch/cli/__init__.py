"""The ``gluonbatch`` command: ``demo``, ``show`` and ``wds``.

One module per command, each with ``add_parser(commands)`` and ``run``: ``demo``, ``show``
and ``wds`` (with ``curate``, its curation steps, and ``convert``, its VOC and COCO
converters); ``usage`` parses, formats the help and holds the exit code of a wrong command
line. The argparse value types and the help format
they share with the example loaders and the benchmarks are in ``gluonbatch._core.argtypes``.
``__main__`` runs the command (``python -m gluonbatch.cli``). The benchmarks are not a
command: they live in the source tree's ``benchmarks`` package (``make bench``), outside
the installed package.

>>> main(['--help'])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
SystemExit: 0
"""
import argparse
import sys

from . import demo, show, usage, wds

__all__ = ['main', 'build_parser']


def build_parser():
    """The argument parser of the ``gluonbatch`` command.

    >>> build_parser().parse_args(['show', '--loader', 'yolo']).command
    'show'
    """
    parser = argparse.ArgumentParser(
        prog='gluonbatch', description='Fast shared-memory batches for MXNet Gluon: example '
                                       'loaders, batch pictures and webdatasets.')
    commands = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')
    for command in (demo, show, wds):  # the order of `gluonbatch --help`
        command.add_parser(commands)
    return usage.finish(parser)


def main(argv=None):
    """Run the command; returns its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = usage.parse(build_parser(), argv)
    return args.run(args)
