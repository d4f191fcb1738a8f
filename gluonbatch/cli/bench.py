"""``gluonbatch bench``: the benchmark table of :mod:`gluonbatch.bench`.

The benchmark parses its own options (``gluonbatch bench --help``); the ``gluonbatch``
parser only lists the command.
"""
__all__ = ['add_parser', 'run']


def add_parser(commands):
    """List ``bench`` among the ``commands`` sub-parsers (for ``gluonbatch --help``).

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog='gluonbatch')
    >>> add_parser(parser.add_subparsers()).add_help
    False
    """
    return commands.add_parser('bench', help='the benchmark table (gluonbatch vs gluoncv vs '
                                             'the floor); gluonbatch bench --help for its '
                                             'options', add_help=False)


def run(argv):
    """Run the benchmark with the options ``argv`` (everything after ``bench``)."""
    # imported here: the other commands need neither the benchmark nor MXNet's timing code
    from ..bench.runner import main

    return main(argv)
