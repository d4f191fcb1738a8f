"""``gluonbatch show``: draw the first batch of an example loader."""
import argparse
import os
from typing import Literal

from .._core.argtypes import png_path, positive_int
from .usage import SubParsers, reported

__all__ = ['add_parser', 'run']


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """Add the ``show`` command to the ``commands`` sub-parsers.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog='gluonbatch')
    >>> add_parser(parser.add_subparsers()).parse_args(['--loader', 'ssd']).batch_size
    4
    """
    show = commands.add_parser('show', help='draw the first batch of an example loader')
    show.add_argument('--loader', required=True,
                      choices=('ssd', 'yolo', 'faster_rcnn', 'center_net'),
                      help='the example loader')
    show.add_argument('-o', '--output', type=png_path, default='batch.png',
                      help='PNG file to write (checked before any work)')
    show.add_argument('--batch-size', type=positive_int, default=4, help='images in the batch')
    show.add_argument('--num-devices', type=positive_int, default=2,
                      help='devices the batch is split for (each slice padded on its own)')
    show.set_defaults(run=run)
    return show


def run(args: argparse.Namespace) -> int:
    """Draw the first batch of ``args.loader`` to ``args.output`` and print the PNG's path;
    returns the exit code (an error of the data is one line and 1:
    :func:`~.usage.reported`)."""
    return reported(args, _show)


def _show(args: argparse.Namespace) -> int:
    # the example loaders import gluoncv; only this command needs them
    from ..examples import center_net, rcnn
    from ..examples.runner import loader_parser
    from ..examples.show import show_batch

    image: Literal['data-shape', 'short'] = ('short' if args.loader == 'faster_rcnn'
                                             else 'data-shape')
    networks = {'ssd': 'ssd_300_mobilenet0.25_voc', 'yolo': 'yolo3_mobilenet0.25_voc',
                'faster_rcnn': rcnn.DEFAULT_NETWORKS['faster'],
                'center_net': center_net.DEFAULT_NETWORK}
    parser = loader_parser('gluonbatch show', 'show', args.batch_size, image,
                           networks[args.loader])
    options = parser.parse_args(['--batch-size', str(args.batch_size), '--num-devices',
                                 str(args.num_devices), '--no-progress'])
    print(show_batch(args.loader, options, os.path.abspath(args.output)))
    return 0
