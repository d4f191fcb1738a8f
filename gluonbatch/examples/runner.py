"""What every example loader shares: options, datasets, timed iteration and the summary."""
import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal, TypeAlias

import mxnet as mx
import numpy as np

from .._core.tree import array_leaves
from ..batchify import Pad, Stack, Tuple
from .._core.argtypes import HelpFormatter, non_negative_int, positive_float, positive_int
from .._core.console import is_terminal
from .._core.failures import report
from .._core.wording import plural
from ..dataloader import DataLoader
from ..samplers import ShardWindowSampler
from .synthetic import SyntheticDetection

__all__ = ['loader_parser', 'detection_dataset', 'train_order', 'detector_loaders',
           'time_loader', 'describe_batch', 'print_summary', 'compare_with_gluoncv',
           'check_losses', 'seeding_line', 'run_example']

#: What :func:`time_loader` returns: ``(batches, samples, seconds, first batch or None,
#: the batches)``.
Timing: TypeAlias = tuple[int, int, float, Any, list[Any]]


def _directory(text):
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError('dataset directory %r does not exist' % text)
    return text


def loader_parser(prog: str, description: str, batch_size: int,
                  image_options: Literal['data-shape', 'short'],
                  network: str) -> argparse.ArgumentParser:
    """Options every loader takes; ``image_options`` adds --data-shape or --short/--max-size.

    >>> parser = loader_parser('ssd_loader', 'SSD', 8, 'data-shape', 'ssd_300_vgg16_atrous_voc')
    >>> args = parser.parse_args(['--batches', '2', '--data-shape', '256'])
    >>> args.batches, args.data_shape, args.batch_size, args.num_workers
    (2, 256, 8, 0)
    """
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=HelpFormatter)
    parser.add_argument('--network', default=network,
                        help='gluoncv model-zoo network, built without weights')
    parser.add_argument('--batch-size', type=positive_int, default=batch_size,
                        help='samples per batch')
    parser.add_argument('--num-workers', type=non_negative_int, default=0,
                        help='DataLoader worker processes')
    parser.add_argument('--num-devices', type=positive_int, default=1,
                        help='devices the batch is split for (each slice padded on its own)')
    parser.add_argument('--batches', type=positive_int, default=4,
                        help='train batches to load')
    parser.add_argument('--samples', type=positive_int, default=64,
                        help='size of the embedded synthetic dataset')
    parser.add_argument('--seed', type=non_negative_int, default=0,
                        help='seed of the embedded synthetic dataset and of the seeded train '
                             'loader: its order and augmentations, the same for any '
                             '--num-workers')
    if image_options == 'data-shape':
        parser.add_argument('--data-shape', type=positive_int, default=None,
                            help='network input size (square)')
    else:
        parser.add_argument('--short', type=positive_int, default=None,
                            help='resize the shorter image side to this')
        parser.add_argument('--max-size', type=positive_int, default=None,
                            help='longest image side after resizing')
    group = parser.add_mutually_exclusive_group()
    group.add_argument('--voc-root', type=_directory, metavar='DIR',
                       help='read Pascal VOC from DIR (gluoncv layout) instead of the '
                            'embedded data')
    group.add_argument('--coco-root', type=_directory, metavar='DIR',
                       help='read MS COCO from DIR (gluoncv layout) instead of the '
                            'embedded data')
    group.add_argument('--shards', type=_directory, metavar='DIR',
                       help='train from the detection shards in DIR (gluonbatch wds from-voc '
                            'or from-coco), read a window of shards at a time')
    parser.add_argument('--val-shards', type=_directory, metavar='DIR',
                        help='validate on the detection shards in DIR (default: --shards)')
    parser.add_argument('--shard-window', type=positive_int, default=4, metavar='W',
                        help='--shards: shards whose samples are shuffled together (SSD, '
                             'YOLOv3, CenterNet; R-CNN batches images of like aspect ratio '
                             'instead)')
    parser.add_argument('--compare-gluoncv', action='store_true',
                        help="also run the loader with gluoncv's batchify and print the ratio")
    parser.add_argument('--train-steps', type=non_negative_int, default=0, metavar='K',
                        help='run K real training iterations on the loaded batches')
    parser.add_argument('--learning-rate', type=positive_float, metavar='LR',
                        help="the SGD learning rate of --train-steps (default: that of "
                             "gluoncv's training script)")
    parser.add_argument('--no-progress', action='store_true', help='no progress bar')
    return parser


def detection_dataset(args: argparse.Namespace, masks: bool = False,
                      split: str = 'train') -> mx.gluon.data.Dataset:
    """The dataset the options ask for: shards, VOC or COCO through gluoncv, else embedded
    data."""
    if args.val_shards and not args.shards:
        raise SystemExit('--val-shards needs --shards (the training shards)')
    if args.shards:
        from ..detection import DetectionShards
        path = args.val_shards if split != 'train' and args.val_shards else args.shards
        dataset = DetectionShards(path)
        if masks and not dataset.segmentation:
            raise ValueError('%s has no polygons: convert it with gluonbatch wds from-coco '
                             '--segmentation' % path)
        return dataset
    if args.voc_root:  # gluoncv's datasets, their JPEGs decoded faster (the same items)
        from ..detection.gluoncv_datasets import VOCDetection
        splits = [(2007, 'trainval'), (2012, 'trainval')] if split == 'train' else \
            [(2007, 'test')]
        return VOCDetection(root=args.voc_root, splits=splits)
    if args.coco_root:
        from ..detection.gluoncv_datasets import COCODetection, COCOInstance
        kind = COCOInstance if masks else COCODetection
        return kind(root=args.coco_root, splits='instances_%s2017' % split, skip_empty=True)
    return SyntheticDetection(length=args.samples, masks=masks,
                              seed=args.seed + (0 if split == 'train' else 1))


def train_order(args: argparse.Namespace, dataset: mx.gluon.data.Dataset
                ) -> ShardWindowSampler | None:
    """The train loader's order over ``dataset``: a window of ``--shard-window`` shards at a
    time for shards (a :class:`~gluonbatch.samplers.ShardWindowSampler` of ``--seed``),
    else None (the seeded sampler's own shuffle)."""
    if not args.shards:
        return None
    return ShardWindowSampler(dataset, window=args.shard_window, seed=args.seed)


def detector_loaders(args: argparse.Namespace, train_data: mx.gluon.data.Dataset,
                     val_data: mx.gluon.data.Dataset, order: Iterable[int] | None = None
                     ) -> tuple[Callable[..., DataLoader], DataLoader, Tuple]:
    """The loaders gluoncv's single-stage detector scripts (SSD, YOLOv3, CenterNet) build,
    each a :class:`gluonbatch.DataLoader`, the training one seeded.

    Returns ``(train_loader, val_loader, val_batchify)``: ``train_loader(batchify_fn)``
    makes the shuffled training loader (``last_batch='rollover'``) with a batchify
    function over ``train_data``, seeded from ``--seed`` (the same batches for any
    ``--num-workers``), in ``order`` if given (:func:`train_order`: the order's seed is
    ``--seed`` too); ``train_loader(batchify_fn, dataset, seed=None)`` makes, over
    ``dataset``, the loader gluoncv's script makes: its arguments, unseeded. The validation
    loader keeps the last batch and stacks images beside labels padded with -1, in
    ``--num-devices`` slices. Close each loader (``with`` or ``close()``) when done with it.
    """
    def train_loader(batchify_fn, dataset=None, seed=args.seed):
        dataset = train_data if dataset is None else dataset
        if seed is None:  # as gluoncv's scripts: the generators as the workers find them
            return DataLoader(dataset, args.batch_size, shuffle=True, last_batch='rollover',
                              batchify_fn=batchify_fn, num_workers=args.num_workers)
        # a ShardWindowSampler gives the order (and whether to shuffle) itself
        return DataLoader(dataset, args.batch_size, shuffle=order is None, sampler=order,
                          last_batch='rollover', batchify_fn=batchify_fn,
                          num_workers=args.num_workers, seed=seed)

    val_batchify = Tuple(Stack(), Pad(pad_val=-1, num_shards=args.num_devices))
    val_loader = DataLoader(val_data, args.batch_size, shuffle=False, last_batch='keep',
                            batchify_fn=val_batchify, num_workers=args.num_workers)
    return train_loader, val_loader, val_batchify


def device_slices(field):
    """A batch field as a list of per-device arrays (a bare NDArray is one slice)."""
    return list(field) if isinstance(field, (list, tuple)) else [field]


def time_loader(loader: Iterable[Any], batches: int, description: str,
                progress: bool = True) -> Timing:
    """Iterate up to ``batches`` batches; returns (batches, samples, seconds, first, kept).

    ``kept`` holds the batches themselves (for training steps); the clock includes waiting
    for every NDArray, since MXNet is asynchronous. The loader is left open: its owner
    closes it. The bar (``progress``) is drawn only on a terminal: elsewhere the summary
    line each stage prints is the progress.

    Examples
    --------
    >>> data = mx.gluon.data.SimpleDataset([np.full(2, i, 'float32') for i in range(8)])
    >>> with DataLoader(data, batch_size=2) as loader:
    ...     batches, samples, seconds, first, kept = time_loader(loader, 3, 'test', False)
    >>> batches, samples, first.shape, len(kept)
    (3, 6, (2, 2), 3)
    """
    from tqdm import tqdm

    kept, samples = [], 0
    bar = tqdm(total=batches, desc=description, unit='batch', leave=False, file=sys.stderr,
               disable=not (progress and is_terminal(sys.stderr)))
    start = time.perf_counter()
    for batch in loader:
        for leaf in array_leaves(batch):
            leaf.wait_to_read()
        kept.append(batch)
        samples += _batch_size(batch)
        bar.update(1)
        if len(kept) == batches:
            break
    seconds = time.perf_counter() - start
    bar.close()
    return len(kept), samples, seconds, (kept[0] if kept else None), kept


def _batch_size(batch):
    first = batch
    while isinstance(first, (list, tuple)):
        if not first:
            return 0
        if isinstance(first, list) and all(isinstance(b, mx.nd.NDArray) for b in first):
            return sum(b.shape[0] for b in first)  # device slices of one field
        first = first[0]
    return first.shape[0] if isinstance(first, mx.nd.NDArray) else 0


def describe_batch(batch: Sequence[Any], names: Sequence[str]) -> list[str]:
    """One line per field: its name and shape (device slices as a list of shapes)."""
    width = max([16] + [len(name) for name in names])  # names longer than 16 widen the column
    lines = []
    for name, field in zip(names, batch):
        if isinstance(field, mx.nd.NDArray):
            text = '%s %s' % (tuple(field.shape), np.dtype(field.dtype).name)
        else:
            text = '[%s]' % ', '.join(str(tuple(leaf.shape)) for leaf in array_leaves(field))
        lines.append('  %-*s %s' % (width, name, text))
    return lines


def print_summary(title: str, counts: Timing, names: Sequence[str]) -> None:
    """Print batches/s, samples/s and the layout of the first batch."""
    batches, samples, seconds, first, _ = counts
    print('%s: %s, %s in %.2f s: %.1f batches/s, %.1f samples/s'
          % (title, plural(batches, 'batch', 'batches'), plural(samples, 'sample'), seconds,
             batches / seconds if seconds else 0.0, samples / seconds if seconds else 0.0))
    if first is not None:
        print('\n'.join(describe_batch(first, names)))


def compare_with_gluoncv(ours: DataLoader, theirs: DataLoader, batches: int,
                         progress: bool) -> float:
    """Load ``batches`` batches with each loader (:class:`gluonbatch.DataLoader`), closing
    each after; print and return the ratio."""
    timings = {}
    for name, loader in (('gluonbatch', ours), ('gluoncv', theirs)):
        with loader:
            _, _, seconds, _, _ = time_loader(loader, batches, 'compare ' + name, progress)
        timings[name] = seconds
    ratio = timings['gluoncv'] / timings['gluonbatch']
    print('gluonbatch %.3f s vs gluoncv %.3f s for %s: %.2fx'
          % (timings['gluonbatch'], timings['gluoncv'], plural(batches, 'batch', 'batches'),
             ratio))
    return ratio


def check_losses(title: str, losses: Iterable[float]) -> bool:
    """Print an error line and return False unless every loss is a finite number.

    >>> check_losses('SSD', [2.5, 1.5])
    True
    >>> check_losses('SSD', [2.5, float('nan')])  # and prints why on stderr
    False
    """
    for step, loss in enumerate(losses, 1):
        if not math.isfinite(loss):
            print('%s training: the loss of step %d is %s, not a finite number; training '
                  'diverged' % (title, step, loss), file=sys.stderr)
            return False
    return True


def seeding_line(title: str, seed: int | None) -> str:
    """The line saying whether the train loader is seeded (``seed``) and what that means.

    >>> seeding_line('SSD', 0)
    'SSD train: seeded (--seed 0): the same batches, augmentations included, for any --num-workers'
    """
    if seed is None:
        return ('%s train: unseeded, as in gluoncv: worker processes start from the same '
                "random state and repeat each other's augmentations" % title)
    return ('%s train: seeded (--seed %d): the same batches, augmentations included, for '
            'any --num-workers' % (title, seed))


def run_example(title: str, parser: argparse.ArgumentParser, argv: Sequence[str] | None,
                build: Callable[[argparse.Namespace], dict[str, Any]],
                fields: Sequence[Sequence[str]],
                train_steps: Callable[..., list[float]]) -> int:
    """The body of every example loader: parse, build, load, summarise, compare, train.

    ``build(args)`` returns the parts: ``net``, ``train_loader`` (a function of the
    batchify function), ``val_loader``, ``train_batchify`` and ``gluoncv_loader`` (a
    function of gluoncv's batchify module: the loader gluoncv's own script builds, its
    presets and batchify) and ``seed``, the train loader's (absent or None: unseeded);
    the loaders are :class:`gluonbatch.DataLoader`, each closed once it has been timed.
    ``fields`` names the train and the val fields;
    ``train_steps(net, batches, steps, learning_rate=...)`` runs training iterations and
    returns their losses. The loaders' workers run OpenCV and BLAS on one thread each by
    themselves; this process's settings are left as they are.
    Returns the exit code: 0, or 1 when a training loss is not a finite number or the data
    is bad (a broken file: then one line on stderr names it, as the ``gluonbatch`` command
    reports it).
    """
    args = parser.parse_args(argv)
    return report(parser.prog, lambda: _run(title, args, build, fields, train_steps), parser)


def _run(title, args, build, fields, train_steps):
    parts = build(args)
    progress = not args.no_progress
    print(seeding_line(title, parts.get('seed')))
    with parts['train_loader'](parts['train_batchify']) as loader:
        counts = time_loader(loader, args.batches, title + ' train', progress)
    print_summary(title + ' train', counts, fields[0])
    with parts['val_loader'] as loader:
        val_counts = time_loader(loader, args.batches, title + ' val', progress)
    print_summary(title + ' val', val_counts, fields[1])
    if args.compare_gluoncv:
        from gluoncv.data import batchify as gcv
        # ours seeded, gluoncv's as its script makes it
        compare_with_gluoncv(parts['train_loader'](parts['train_batchify']),
                             parts['gluoncv_loader'](gcv), args.batches, progress)
    if args.train_steps:
        # each example's own learning rate unless --learning-rate overrides it
        options = {} if args.learning_rate is None else {'learning_rate': args.learning_rate}
        losses = train_steps(parts['net'], counts[4], args.train_steps, **options)
        print('%s training: %s, loss %s'
              % (title, plural(len(losses), 'step'), ' -> '.join('%.3f' % loss
                                                                 for loss in losses)))
        if not check_losses(title, losses):
            return 1
    return 0
