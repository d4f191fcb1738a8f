"""The ``gluonbatch`` command: ``demo``, ``bench`` and ``show``.

>>> main(['--help'])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
SystemExit: 0
"""
import argparse
import os
import sys

from ._args import positive_int

__all__ = ['main']


def _demo(args):
    from .examples import rcnn, ssd
    from .examples.runner import loader_parser
    from .examples.show import show_batch

    common = ['--batches', str(args.batches), '--num-workers', str(args.num_workers)]
    print('== Faster R-CNN loader (embedded data, 2 shards) ==')
    rcnn.main_faster(common + ['--batch-size', '4', '--num-shards', '2'])
    print('\n== SSD loader (embedded data) ==')
    ssd.main(common + ['--batch-size', '8'])
    parser = loader_parser('demo', 'demo', 4, 'short', rcnn.DEFAULT_NETWORKS['faster'])
    picture_args = parser.parse_args(['--batch-size', '4', '--num-shards', '2',
                                      '--no-progress'])
    path = show_batch('faster_rcnn', picture_args, os.path.abspath(args.output))
    print('\nThe first Faster R-CNN batch is drawn in %s' % path)
    return 0


def _show(args):
    from .examples import rcnn
    from .examples.runner import loader_parser
    from .examples.show import show_batch

    image = 'short' if args.loader == 'faster_rcnn' else 'data-shape'
    networks = {'ssd': 'ssd_300_mobilenet0.25_voc', 'yolo': 'yolo3_mobilenet0.25_voc',
                'faster_rcnn': rcnn.DEFAULT_NETWORKS['faster']}
    parser = loader_parser('gluonbatch show', 'show', args.batch_size, image,
                           networks[args.loader])
    options = parser.parse_args(['--batch-size', str(args.batch_size), '--num-shards',
                                 str(args.num_shards), '--no-progress'])
    print(show_batch(args.loader, options, os.path.abspath(args.output)))
    return 0


def build_parser():
    """The argument parser of the ``gluonbatch`` command."""
    parser = argparse.ArgumentParser(
        prog='gluonbatch', description='Fast shared-memory batches for MXNet Gluon: example '
                                       'loaders, benchmark and batch pictures.')
    commands = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')

    demo = commands.add_parser('demo', help='run the Faster R-CNN and SSD loaders on embedded '
                                            'data and draw a batch')
    demo.add_argument('-o', '--output', default='demo_batch.png', help='PNG to write')
    demo.add_argument('--batches', type=positive_int, default=4)
    demo.add_argument('--num-workers', type=int, choices=range(0, 65), default=2,
                      metavar='N', help='DataLoader worker processes (default 2)')
    demo.set_defaults(run=_demo)

    # listed for --help; `main` hands everything after "bench" to the benchmark itself
    commands.add_parser('bench', help='the benchmark table (gluonbatch vs gluoncv vs the '
                                      'floor); gluonbatch bench --help for its options',
                        add_help=False)

    show = commands.add_parser('show', help='draw the first batch of an example loader')
    show.add_argument('--loader', required=True, choices=('ssd', 'yolo', 'faster_rcnn'))
    show.add_argument('-o', '--output', default='batch.png', help='PNG to write')
    show.add_argument('--batch-size', type=positive_int, default=4)
    show.add_argument('--num-shards', type=positive_int, default=2)
    show.set_defaults(run=_show)
    return parser


def main(argv=None):
    """Run the command; returns its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ['bench']:
        from . import benchmark
        return benchmark.main(argv[1:])
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == '__main__':
    sys.exit(main())
