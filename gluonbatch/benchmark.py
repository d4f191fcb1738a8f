"""The benchmark under its earlier import path; it lives in :mod:`gluonbatch.bench`.

``gluonbatch.benchmark.main`` is what ``gluonbatch bench``, ``make bench`` and
``scripts/bench.py`` run, and ``python -m gluonbatch.benchmark`` runs it too. Importing
this module does not import gluoncv.

>>> from gluonbatch import benchmark
>>> benchmark.main(['--help'])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
SystemExit: 0
"""
import sys

from .bench.harness import back_to_back_medians, host_temporaries, interleaved_medians
from .bench.plot import plot_ratios
from .bench.runner import main

__all__ = ['main', 'plot_ratios', 'interleaved_medians', 'back_to_back_medians',
           'host_temporaries']

if __name__ == '__main__':
    sys.exit(main())
