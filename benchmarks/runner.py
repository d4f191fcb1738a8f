"""``python -m benchmarks``: options, the cases in report order, and the run.

The case modules import gluoncv (the reference every case compares against); they are
imported only when their case runs, so ``python -m benchmarks --help`` and importing this
module work without gluoncv, and a run without it stops with a one-line message and exit
code 2.
"""
import argparse
import contextlib
import gc
import importlib
import sys

import numpy as np
from gluonbatch._core.argtypes import HelpFormatter, positive_int

from .plot import plot_ratios
from .report import format_report, json_ready, machine_facts, write_json

__all__ = ['CASES', 'parse_args', 'gluoncv_missing', 'main']

#: The command, as usage lines and errors name it.
PROG = 'python -m benchmarks'
#: The first paragraph of ``python -m benchmarks --help``.
DESCRIPTION = 'Benchmark gluonbatch against gluoncv and against "the floor"; ``make bench``.'
#: Default rounds for cases whose output is large (tens of MB) and small (tens of kB).
BIG_ROUNDS, SMALL_ROUNDS, QUICK_ROUNDS = 15, 50, 3
#: Default rounds (timed epochs per contender) of the loader cases.
LOADER_ROUNDS = 3
#: ... of the recycled loader case, whose epochs are short (16 batches of 100 MB).
RECYCLED_ROUNDS = 5
#: ... of resharding, whose rounds vary by a third where the disk and host are shared.
RESHARD_ROUNDS = 7
#: ... of the seeded loader, whose goal (2%) is finer than a loader's epochs vary.
SEEDED_ROUNDS = 9
#: With ``--quick``, the module whose ``quick_session()`` is open around these cases, from
#: the first of them run to the last: the curation cases share forked fresh processes and
#: their Dask clusters.
QUICK_SESSIONS = {'curation_metadata': 'cases_curation', 'curation_reshard': 'cases_curation'}
#: What installs gluoncv, the benchmark's reference.
INSTALL_HINT = "pip install 'gluonbatch[examples]'"

#: (case, module of ``case_<case>`` in this package, default rounds) in report order.
CASES = (('pad_labels', 'cases_batchify', SMALL_ROUNDS),
         ('pad_images', 'cases_batchify', BIG_ROUNDS),
         ('stack_numpy', 'cases_batchify', BIG_ROUNDS),
         ('stack_ndarray', 'cases_batchify', BIG_ROUNDS),
         ('rcnn_c4', 'cases_rcnn', BIG_ROUNDS),
         ('rcnn_fpn', 'cases_rcnn', BIG_ROUNDS),
         ('loader', 'cases_loader', LOADER_ROUNDS),
         ('webdataset', 'cases_webdataset', LOADER_ROUNDS),
         ('memory', 'cases_batchify', BIG_ROUNDS),
         ('loader_recycled', 'cases_recycling', RECYCLED_ROUNDS),
         ('worker_batchify', 'cases_recycling', BIG_ROUNDS),
         ('rcnn_loader_recycled', 'cases_recycling', LOADER_ROUNDS),
         ('curation_metadata', 'cases_curation', LOADER_ROUNDS),
         ('curation_reshard', 'cases_reshard', RESHARD_ROUNDS),
         ('transforms_ssd', 'cases_transforms', BIG_ROUNDS),
         ('transforms_yolo', 'cases_transforms', BIG_ROUNDS),
         ('transforms_center_net', 'cases_transforms', BIG_ROUNDS),
         ('transforms_rcnn', 'cases_transforms', BIG_ROUNDS),
         ('transforms_loader_ssd', 'cases_transforms', LOADER_ROUNDS),
         ('transforms_loader_yolo', 'cases_transforms', LOADER_ROUNDS),
         ('transforms_loader_center_net', 'cases_transforms', LOADER_ROUNDS),
         ('batch_targets_ssd', 'cases_batch_targets', BIG_ROUNDS),
         ('batch_targets_yolo', 'cases_batch_targets', BIG_ROUNDS),
         ('batch_targets_center_net', 'cases_batch_targets', BIG_ROUNDS),
         ('seeded_loader', 'cases_seeded', SEEDED_ROUNDS),
         ('resume', 'cases_seeded', SMALL_ROUNDS),
         ('shards', 'cases_shards', LOADER_ROUNDS),
         ('jpeg_loader_ssd', 'cases_jpeg', LOADER_ROUNDS),
         ('jpeg_loader_yolo', 'cases_jpeg', LOADER_ROUNDS),
         ('jpeg_loader_center_net', 'cases_jpeg', LOADER_ROUNDS))


def parse_args(argv):
    """Command-line options.

    >>> parse_args(['--quick', '--only', 'loader']).only
    ['loader']
    """
    parser = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION,
                                     formatter_class=HelpFormatter)
    parser.add_argument('--repeats', type=positive_int, default=None, metavar='N',
                        help='interleaved rounds per case (default: %d for the small case, '
                             '%d for the large ones, %d with --quick)'
                             % (SMALL_ROUNDS, BIG_ROUNDS, QUICK_ROUNDS))
    parser.add_argument('--quick', action='store_true',
                        help='smoke mode: small inputs and few rounds (for tests)')
    parser.add_argument('--seed', type=int, default=0, help='RNG seed for the inputs')
    parser.add_argument('--only', action='append', metavar='CASE',
                        choices=[case for case, _, _ in CASES],
                        help='run only this case (repeatable): %(choices)s')
    parser.add_argument('--json', metavar='PATH', help='also write the results as JSON here')
    parser.add_argument('--plot', metavar='PATH',
                        help='also draw a bar chart of the ratios to the floor (PNG) here')
    return parser.parse_args(argv)


def gluoncv_missing():
    """Why gluoncv cannot be imported, on one line, or None when it can.

    >>> gluoncv_missing() is None  # the test environment installs gluoncv
    True
    """
    try:
        importlib.import_module('gluoncv')
    except ImportError as err:
        return ' '.join(str(err).split()) or type(err).__name__
    return None


def _module(module):
    return importlib.import_module('.' + module, __package__)


def _run_cases(args):
    """The rows of the cases ``args`` selects, in report order."""
    selected = [(number, case, module, default_rounds)
                for number, (case, module, default_rounds) in enumerate(CASES)
                if not args.only or case in args.only]
    rows = []
    with contextlib.ExitStack() as everything:
        if args.quick:
            _freeze_survivors(everything)
        sessions = {}  # module -> the ExitStack of its open quick session
        for position, (number, case, module, default_rounds) in enumerate(selected):
            owner = QUICK_SESSIONS.get(case) if args.quick else None
            if owner is not None and owner not in sessions:
                sessions[owner] = everything.enter_context(contextlib.ExitStack())
                sessions[owner].enter_context(_module(owner).quick_session())
            rounds = args.repeats or (QUICK_ROUNDS if args.quick else default_rounds)
            rng = np.random.default_rng([args.seed, number])
            row = getattr(_module(module), 'case_' + case)(rng, rounds, args.quick)
            row['number'] = number + 1
            rows.append(row)
            if owner is not None and all(QUICK_SESSIONS.get(later[1]) != owner
                                         for later in selected[position + 1:]):
                sessions[owner].close()  # its processes would slow the cases after it
            gc.collect()
            if args.quick:
                gc.freeze()
    return rows


def _freeze_survivors(stack):
    """Quick runs: collect, then freeze what exists out of the collector's reach until
    ``stack`` closes (the runner freezes again after each case). The collections before
    every round then walk only the running case's objects, not the whole process (imports,
    networks, a test session's heap), which took a third of a quick run. Objects someone
    else froze stay frozen."""
    gc.collect()
    if gc.get_freeze_count() == 0:
        stack.callback(gc.unfreeze)
    gc.freeze()


def main(argv=None):
    """Run every case, print the report, optionally write JSON; returns 0 (a report).

    Returns 2, after one line on stderr, when gluoncv cannot be imported.
    """
    args = parse_args(argv)
    missing = gluoncv_missing()
    if missing is not None:
        print('%s: error: the benchmark compares against gluoncv, which cannot '
              'be imported (%s); install it with %s' % (PROG, missing, INSTALL_HINT),
              file=sys.stderr)
        return 2
    facts = machine_facts()
    rows = _run_cases(args)
    print(format_report(facts, rows, args.quick))
    results = json_ready(facts, rows, args.quick, args.seed)
    if args.json:
        write_json(results, args.json)
    if args.plot:
        plot_ratios(results, args.plot)
    return 0
