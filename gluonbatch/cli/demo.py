"""``gluonbatch demo``: the Faster R-CNN and SSD loaders on embedded data, and a batch picture.

What ``make demo`` runs. Every loader is a :class:`gluonbatch.DataLoader`, closed once
it has loaded its batches; its workers run OpenCV and BLAS on one thread each. Both train
loaders are seeded (the same batches for any ``--num-workers``; Faster R-CNN's
aspect-ratio buckets from :class:`~gluonbatch.samplers.SeededBucketSampler`), and each says
so as it starts.
"""
import argparse
import os

from .._core.argtypes import int_from, png_path, positive_int
from .usage import SubParsers, reported

__all__ = ['add_parser', 'run']


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """Add the ``demo`` command to the ``commands`` sub-parsers.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog='gluonbatch')
    >>> add_parser(parser.add_subparsers()).parse_args(['--batches', '2']).batches
    2
    """
    demo = commands.add_parser('demo', help='run the Faster R-CNN and SSD loaders on embedded '
                                            'data and draw a batch')
    demo.add_argument('-o', '--output', type=png_path, default='demo_batch.png',
                      help='PNG file to write (checked before any work)')
    demo.add_argument('--batches', type=positive_int, default=4,
                      help='batches each loader loads')
    demo.add_argument('--num-workers', type=int_from(0, 64), default=2, metavar='N',
                      help='DataLoader worker processes, 0 to 64')
    demo.set_defaults(run=run)
    return demo


def run(args: argparse.Namespace) -> int:
    """Run both loaders for ``args.batches`` batches, then draw the first R-CNN batch.

    Returns the exit code: 0, or a loader's that was not 0 (then nothing is drawn); an
    error of the data is one line and exit code 1 (:func:`~.usage.reported`).
    """
    return reported(args, _demo)


def _demo(args: argparse.Namespace) -> int:
    # the example loaders import gluoncv; only this command needs them
    from ..examples import rcnn, ssd
    from ..examples.runner import loader_parser
    from ..examples.show import show_batch

    common = ['--batches', str(args.batches), '--num-workers', str(args.num_workers)]
    print('== Faster R-CNN loader (embedded data, 2 devices) ==')
    code = rcnn.main_faster(common + ['--batch-size', '4', '--num-devices', '2'])
    print('\n== SSD loader (embedded data, seeded) ==')
    code = ssd.main(common + ['--batch-size', '8']) or code
    if code:
        return code
    parser = loader_parser('demo', 'demo', 4, 'short', rcnn.DEFAULT_NETWORKS['faster'])
    picture_args = parser.parse_args(['--batch-size', '4', '--num-devices', '2',
                                      '--no-progress'])
    path = show_batch('faster_rcnn', picture_args, os.path.abspath(args.output))
    print('\nThe first Faster R-CNN batch is drawn in %s' % path)
    return 0
