"""``gluonbatch wds from-voc / from-coco``: convert Pascal VOC or MS COCO, in gluoncv's
layout on disk, into detection shards (:func:`~gluonbatch.detection.from_voc`,
:func:`~gluonbatch.detection.from_coco`), with a progress bar on a terminal and a line
per stage elsewhere."""
import argparse

from .._core.argtypes import positive_int
from .._core.wording import plural
from .usage import Runner, SubParsers

__all__ = ['add_actions']


def _written(path):
    """Print what a conversion wrote into ``path``."""
    from ..detection.annotations import read_manifest

    manifest = read_manifest(path)
    records = sum(count for _, count in manifest['shards'])
    print('%s: %s in %s, %s%s' % (
        path, plural(records, 'record'), plural(len(manifest['shards']), 'shard'),
        plural(len(manifest['classes']), 'class', 'classes'),
        ' with polygons' if manifest['segmentation'] else ''))
    return 0


def _split_arg(text: str) -> str:
    """A ``--splits`` value, checked as :func:`~gluonbatch.detection.from_voc` checks a
    string split (``YEAR:NAME`` or ``FOLDER:NAME``), for argparse ``type=``.

    >>> _split_arg('2007:trainval')
    '2007:trainval'
    >>> _split_arg('2007')
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected YEAR:NAME (the folder VOC<YEAR>) or FOLDER:NAME, \
got '2007'
    """
    from ..detection.sources import voc_splits

    try:
        voc_splits([text])
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError('expected YEAR:NAME (the folder VOC<YEAR>) or '
                                         'FOLDER:NAME, got %r' % text) from None
    return text


def _from_voc(args):
    from ..detection import from_voc

    return _written(from_voc(args.root, args.dst, splits=args.splits,
                             samples_per_shard=args.samples_per_shard,
                             invalid_boxes=args.invalid_boxes, progress=args.progress))


def _from_coco(args):
    from ..detection import from_coco

    return _written(from_coco(args.root, args.dst, split=args.split,
                              segmentation=args.segmentation,
                              min_object_area=args.min_object_area,
                              use_crowd=not args.no_crowd, skip_empty=not args.keep_empty,
                              samples_per_shard=args.samples_per_shard,
                              progress=args.progress))


def _common(parser, source):
    parser.add_argument('root', help='the %s root directory (gluoncv\'s root)' % source)
    parser.add_argument('dst', help='the new dataset\'s directory (made if missing; it may '
                                    'not hold a dataset)')
    parser.add_argument('--samples-per-shard', type=positive_int, default=1000, metavar='N',
                        help='records per shard')
    parser.add_argument('--no-progress', dest='progress', action='store_false',
                        help='no progress bar or progress lines')


def add_actions(actions: SubParsers, run: Runner) -> None:
    """Add ``from-voc`` and ``from-coco`` to the ``wds`` actions; ``run`` runs them."""
    voc = actions.add_parser('from-voc', help='convert Pascal VOC (gluoncv\'s layout) into '
                                              'detection shards')
    _common(voc, 'VOC')
    voc.add_argument('--splits', nargs='+', type=_split_arg,
                     default=['2007:trainval', '2012:trainval'], metavar='YEAR:NAME',
                     help='splits, in record order: YEAR:NAME (folder VOC<YEAR>) or '
                          'FOLDER:NAME')
    voc.add_argument('--invalid-boxes', choices=('error', 'drop'), default='error',
                     help='a box outside its image: stop with an error, or drop it as '
                          'gluoncv does')
    voc.set_defaults(run=run, action=_from_voc)

    coco = actions.add_parser('from-coco', help='convert MS COCO (gluoncv\'s layout) into '
                                                'detection shards')
    _common(coco, 'COCO')
    coco.add_argument('--split', default='train2017',
                      help='the split: annotations/instances_SPLIT.json, images in SPLIT/')
    coco.add_argument('--segmentation', action='store_true',
                      help='also the polygons, for COCOInstance (Mask R-CNN)')
    coco.add_argument('--min-object-area', type=float, metavar='AREA',
                      help='leave out smaller objects (default gluoncv\'s: 0, or 1 with '
                           '--segmentation)')
    coco.add_argument('--no-crowd', action='store_true',
                      help='leave out crowd objects (with --segmentation they always are)')
    coco.add_argument('--keep-empty', action='store_true',
                      help='keep images without objects (gluoncv\'s skip_empty=False)')
    coco.set_defaults(run=run, action=_from_coco)
