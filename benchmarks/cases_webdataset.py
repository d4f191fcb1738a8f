"""Case 8: an image-text WebDataset through a 2-worker DataLoader, raw reads and resharding.

The case function takes ``(rng, rounds, quick)`` and returns the case's row with its
checks. This module imports gluoncv: the runner imports it only to run the case.
"""
import functools
import gc
import itertools
import os
import shutil
import tarfile
import tempfile
import time

import gluoncv.data.batchify as gcv
import mxnet as mx

from gluonbatch import batchify as gb
from gluonbatch.curation import ImageTextPairDataset, make_example_dataset
from gluonbatch.shards import verify

from .harness import interleave, time_call, time_epoch
from .rows import check_same, layout_fields, ratio_check, timing_fields

__all__ = ['case_webdataset', 'raw_reads', 'write_and_remove', 'copy_files']


def _read_front_to_back(paths):
    """Read every file in 1 MB chunks into one buffer (the sequential floor)."""
    buf = bytearray(1 << 20)
    for path in paths:
        with open(path, 'rb', buffering=0) as handle:
            while handle.readinto(buf):
                pass


def _stream_tars(paths):
    """Read every member of every tar in order with ``tarfile`` (a sequential reader)."""
    for path in paths:
        with tarfile.open(path, 'r:') as tar:
            for info in tar:
                tar.extractfile(info).read()


def _verified(path):
    """Check the whole dataset at ``path`` (no decode); it must have no problems."""
    problems = verify(path)
    if problems:
        raise RuntimeError('the benchmark dataset has problems: %s' % problems[0])


def raw_reads(ds, indices):
    """Seconds to read the raw records ``indices`` of ``ds`` (no decode), in that order."""
    start = time.perf_counter()
    for i in indices:
        ds.read_raw(i)
    return time.perf_counter() - start


def write_and_remove(target, write, make_dir=False):
    """Seconds ``write(target)`` takes; ``target`` is removed afterwards."""
    if make_dir:
        os.makedirs(target)
    start = time.perf_counter()
    write(target)
    elapsed = time.perf_counter() - start
    shutil.rmtree(target)
    return elapsed


def copy_files(paths, target):
    for path in paths:
        shutil.copyfile(path, os.path.join(target, os.path.basename(path)))


def case_webdataset(rng, rounds, quick):
    """Case 8: records/s of an ImageTextPairDataset through a 2-worker DataLoader.

    2,000 records (200 with ``--quick``) of 64..128 px JPEGs, a caption and JSON metadata in
    4 shards with ``.idx`` files; batch size 32, shuffled, ``Tuple(Pad(axis=(0, 1)), List(),
    List())``. Also raw random reads vs sequential reads per record, ``verify`` of the whole
    dataset, and resharding MB/s vs a file copy.
    """
    count, shards, batch_size, workers = (200, 4, 32, 2) if quick else (2000, 4, 32, 2)
    root = tempfile.mkdtemp(prefix='gluonbatch-bench-wds-')
    try:
        source = make_example_dataset(os.path.join(root, 'source'), num_shards=shards,
                                      samples_per_shard=count // shards, min_size=64,
                                      max_size=128, seed=int(rng.integers(2 ** 31)), index=True)
        ds = ImageTextPairDataset.from_webdataset(source, 'key')
        tars = ds.tar_files
        tar_bytes = sum(os.path.getsize(path) for path in tars)
        gb_fn = gb.Tuple(gb.Pad(axis=(0, 1)), gb.List(), gb.List())
        gcv_fn = gcv.Tuple(gcv.Pad(axis=(0, 1)), list, list)
        first = [ds[i] for i in range(batch_size)]
        outputs = check_same('webdataset', gb_fn(first)[0], gcv_fn(first)[0])
        del first

        def loader(batchify_fn):
            return mx.gluon.data.DataLoader(ds, batch_size=batch_size, shuffle=True,
                                            last_batch='keep', batchify_fn=batchify_fn,
                                            num_workers=workers)

        batches = -(-count // batch_size)
        loaders = {'gluonbatch': loader(gb_fn), 'gluoncv': loader(gcv_fn)}
        # seconds per record; the warm-up starts the worker pools and reads every record once
        contenders = {name: (lambda ld=ld: time_epoch(ld) * batches / count)
                      for name, ld in loaders.items()}
        contenders['floor'] = lambda: time_call(lambda: _read_front_to_back(tars)) / count
        order = list(range(count))
        targets = itertools.count()  # a fresh directory name for every write

        def reshard():
            return write_and_remove(
                os.path.join(root, 'reshard%d' % next(targets)),
                lambda target: ds.to_webdataset(target, None, samples_per_shard=count // shards))

        def copy():
            return write_and_remove(os.path.join(root, 'copy%d' % next(targets)),
                                     functools.partial(copy_files, tars), make_dir=True)

        follow = {'random': lambda: raw_reads(ds, rng.permutation(count).tolist()),
                  'in_order': lambda: raw_reads(ds, order),
                  'tarfile_stream': lambda: time_call(lambda: _stream_tars(tars)),
                  'verify': lambda: time_call(lambda: _verified(source)),
                  'reshard': reshard, 'copyfile': copy}
        medians, times = interleave(contenders, rounds, follow)
        del loaders, contenders
        gc.collect()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    extra = {name: medians.pop(name) for name in follow}
    times = {name: values for name, values in times.items() if name in medians}
    raw_us = {name: extra[name] / count * 1e6
              for name in ('random', 'in_order', 'tarfile_stream', 'verify')}
    raw_us['sequential'] = medians['floor'] * 1e6
    reshard_mb_s = tar_bytes / extra['reshard'] / 1e6
    copy_mb_s = tar_bytes / extra['copyfile'] / 1e6
    row = {
        'case': 'webdataset',
        'title': 'WebDataset %d rec, %d workers, B=%d' % (count, workers, batch_size),
        'rounds': rounds,
        'unit': 'ms per record; rounds are shuffled epochs of %d records' % count,
        **layout_fields([outputs]),
        'tar_bytes': tar_bytes, 'records': count,
        'records_per_s': {name: 1.0 / seconds for name, seconds in medians.items()},
        'raw_read_us_per_record': raw_us,
        'reshard_mb_per_s': reshard_mb_s, 'copyfile_mb_per_s': copy_mb_s,
        **timing_fields(medians, times),
    }
    row['checks'] = [
        ratio_check('records/s gluonbatch / gluoncv', row['ratios']['gluoncv/gluonbatch']),
        ratio_check('loader / raw sequential read', row['ratios']['gluonbatch/floor']),
        ratio_check('random raw read / sequential', raw_us['random'] / raw_us['sequential'],
                    ('<=', 2)),
        ratio_check('random / in-order raw read', raw_us['random'] / raw_us['in_order']),
        ratio_check('random raw / tarfile stream', raw_us['random'] / raw_us['tarfile_stream']),
        ratio_check('reshard MB/s / copyfile MB/s', reshard_mb_s / copy_mb_s),
        ratio_check('verify / raw sequential read', raw_us['verify'] / raw_us['sequential']),
    ]
    return row
