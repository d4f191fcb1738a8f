"""Cases ``jpeg_loader_ssd``, ``_yolo`` and ``_center_net``: training from JPEG files.

The bench writes VOC-like 500x375 JPEGs in gluoncv's layout
(:func:`~gluonbatch.detection.make_voc_example`) and times, in interleaved rounds, a
2-worker DataLoader (batch 32) reading them, decode included:

- ``gluonbatch``: :class:`gluonbatch.detection.gluoncv_datasets.VOCDetection` (libjpeg-turbo's decode with
  MXNet's pixels), gluonbatch's preset without targets, its image deferred to the batch,
  and the batch's targets, the workers forked with OpenCV on one thread (as
  :class:`gluonbatch.DataLoader` runs its workers);
- ``mxnet decode``: the same but for gluoncv's ``VOCDetection`` (MXNet decodes) and the
  preset's image written, then copied into the batch: the ratio is the gain of the JPEG
  path and of the deferred images (the presets' own gains since are in both);
- ``gluoncv``: gluoncv's dataset, preset (with its targets) and its script's batchify;
- ``floor``: decoding alone (libjpeg-turbo), 2 workers.

Every column is MXNet's own ``DataLoader``, so that they differ by the data path alone,
not by the loader; the first two (and SSD's 1-worker loader) fork their workers inside
``_opencv_threads(1)``.

For SSD300 also the CPU time of one sample (OpenCV on one thread; every process and thread
counted, so the copy threads of a batch count too), two ways: a 1-worker loader (its worker
does all of a sample's work and recycles its batches' memory; this process only receives
the batches), and the same work in this process, seeded alike every round (each batch in
fresh shared memory, which a worker does not pay for), with its stages: the decode, the
preset, and the batch (targets and writes).

Goals: SSD300 at least 400 images/s and at most 4.5 ms of CPU per image. For YOLOv3 and
CenterNet the ratio to ``mxnet decode`` is reported, without a goal: their goal, 1.5x the
pipeline as it stood before the JPEG path, needs that pipeline's presets, which improved
since (they are in both columns here); the performance page gives that measurement, made
side by side with the older source tree.

The case functions take ``(rng, rounds, quick)`` and return the case's row with its checks.
This module imports gluoncv: the runner imports it only to run a case.
"""
import contextlib
import functools
import os
import random
import shutil
import tempfile
import time

import mxnet as mx
import numpy as np

from gluonbatch.detection.gluoncv_datasets import VOCDetection as FastVOCDetection
from gluonbatch.detection import make_voc_example

from .cases_loader import WORKERS
from .cases_seeded import epoch_costs, process_tree_cpu_seconds
from .cases_transforms import (BATCH_SIZE, QUICK_LOADER, preset_pair, script_batchify,
                               target_batchify, untargeted_preset)
from .harness import interleave, time_epoch
from .rows import ms_fields, ratio_check, value_check

__all__ = ['case_jpeg_loader_ssd', 'case_jpeg_loader_yolo', 'case_jpeg_loader_center_net',
           'SSD_IMAGES_PER_S', 'SSD_ONE_CORE_MS']

#: The goals: SSD300 images/s (2 workers) and ms per image on one core.
SSD_IMAGES_PER_S, SSD_ONE_CORE_MS = 400.0, 4.5
#: Batches per epoch.
BATCHES = 4


@contextlib.contextmanager
def _opencv_threads(count):
    """OpenCV on ``count`` threads in this process, and in the processes forked meanwhile
    (MXNet's DataLoader forks its workers as it is made); the setting before is restored.

    Set here, before the workers fork, never in them: ``cv2.setNumThreads(1)`` in a forked
    child can hang (see :mod:`gluonbatch._core.threads`).

    >>> import cv2
    >>> with _opencv_threads(1):
    ...     cv2.getNumThreads()
    1
    """
    import cv2

    before = cv2.getNumThreads()
    cv2.setNumThreads(count)
    try:
        yield
    finally:
        cv2.setNumThreads(before)


def _one_core_ms(dataset, preset, batchify, batch_size, stages):
    """CPU milliseconds per image of decode, preset and the batch's targets in this process
    (every thread counted), OpenCV on one thread; each stage's share appended to
    ``stages`` (name -> list): the decode and the preset in this thread's CPU time, the
    batch (targets and writes, with the threads that write it) the rest."""
    random.seed(0)
    np.random.seed(0)
    decode = augment = 0.0
    with _opencv_threads(1):
        before = process_tree_cpu_seconds()
        for first in range(0, len(dataset) - batch_size + 1, batch_size):
            samples = []
            for index in range(first, first + batch_size):
                start = time.thread_time()
                item = dataset[index]
                middle = time.thread_time()
                samples.append(preset(*item))
                decode, augment = decode + middle - start, augment + time.thread_time() - middle
            for field in batchify(samples):
                field.wait_to_read()
        spent = process_tree_cpu_seconds() - before
    images = len(dataset) // batch_size * batch_size
    for name, seconds in (('decode', decode), ('preset', augment),
                          ('batch', spent - decode - augment)):
        stages.setdefault(name, []).append(seconds / images * 1e3)
    return spent / images * 1e3


def _jpeg_case(kind, rng, rounds, quick):
    from gluoncv.data import VOCDetection
    from gluoncv.data import batchify as gcv

    title, theirs, _, _ = preset_pair(kind, quick)
    batch_size, batches = QUICK_LOADER if quick else (BATCH_SIZE, BATCHES)
    count = batch_size * batches
    root = tempfile.mkdtemp(prefix='gluonbatch-bench-jpeg-')
    try:
        voc = make_voc_example(os.path.join(root, 'voc'), num_images=count,
                               splits=[(2007, 'trainval')], seed=int(rng.integers(2 ** 31)))
        fast, files = FastVOCDetection(voc, splits=[(2007, 'trainval')]), \
            VOCDetection(voc, splits=[(2007, 'trainval')])
        preset, batchify = untargeted_preset(kind, quick), target_batchify(kind, quick)
        before = untargeted_preset(kind, quick, deferred=False)
        one_core, stages = {}, {}

        def loader(dataset, batchify_fn, workers=WORKERS):
            return mx.gluon.data.DataLoader(dataset, batch_size=batch_size, shuffle=True,
                                            last_batch='keep', batchify_fn=batchify_fn,
                                            num_workers=workers)

        with _opencv_threads(1):  # the workers fork with it: one thread each, as ours run
            ours = loader(fast.transform(preset), batchify)
            theirs_decode = loader(files.transform(before), batchify)
            if kind == 'ssd':  # one worker: one core does all of a sample's work
                one_core['loader'] = loader(fast.transform(preset), batchify, 1)
        loaders = {'gluonbatch': ours,
                   'mxnet decode': theirs_decode,
                   'gluoncv': loader(files.transform(theirs), script_batchify(kind, gcv)),
                   # the decoded images' heights: the decode, and next to nothing sent back
                   'floor': loader(fast.transform(lambda image, label: image.shape[0]), list)}
        follow = {}
        if kind == 'ssd':
            follow['one core'] = lambda: epoch_costs(one_core['loader'], batches,
                                                     []) / batch_size * 1e3
            follow['one core, in process'] = functools.partial(
                _one_core_ms, fast, preset, batchify, batch_size, stages)
        medians, times = interleave({name: functools.partial(time_epoch, ld)
                                     for name, ld in loaders.items()}, rounds, follow)
        del loaders, ours, theirs_decode
        one_core.clear()  # the 1-worker loader's pool goes before its files
    finally:
        shutil.rmtree(root, ignore_errors=True)
    extra = {name: medians.pop(name) for name in follow}
    times = {name: values for name, values in times.items() if name in medians}
    images_per_s = {name: batch_size / seconds for name, seconds in medians.items()}
    row = {'case': 'jpeg_loader_' + kind, 'rounds': rounds,
           'title': '%s from JPEG files, %d-worker loader, B=%d'
                    % (title.split(' +')[0], WORKERS, batch_size),
           'unit': 'ms per batch; rounds are epochs of %d batches' % batches,
           'outputs': [], 'out_bytes': 0, 'images_per_s': images_per_s,
           **ms_fields(medians, times)}
    row['ratios'] = {'gluoncv/gluonbatch': medians['gluoncv'] / medians['gluonbatch'],
                     'mxnet decode/gluonbatch': medians['mxnet decode'] / medians['gluonbatch'],
                     'gluonbatch/floor': medians['gluonbatch'] / medians['floor'],
                     'gluoncv/floor': medians['gluoncv'] / medians['floor']}
    row['checks'] = [ratio_check('%s from JPEG images/s vs gluoncv' % kind,
                                 row['ratios']['gluoncv/gluonbatch'])]
    if kind == 'ssd':
        row['one_core_ms'] = extra['one core']
        row['one_core_in_process_ms'] = extra['one core, in process']
        # the first of each stage's values is the warm-up's
        row['one_core_stages_ms'] = {name: float(np.median(values[1:]))
                                     for name, values in stages.items()}
        row['checks'] += [
            value_check('ssd from JPEG, 2 workers', images_per_s['gluonbatch'], 'rec/s',
                        ('>=', SSD_IMAGES_PER_S)),
            value_check('ssd from JPEG, CPU per image', extra['one core'], 'ms',
                        ('<=', SSD_ONE_CORE_MS))]
    else:
        row['checks'].append(ratio_check('%s from JPEG vs MXNet decode' % kind,
                                         row['ratios']['mxnet decode/gluonbatch']))
    return row


def case_jpeg_loader_ssd(rng, rounds, quick):
    """SSD300 from JPEG files: a 2-worker DataLoader, decode included."""
    return _jpeg_case('ssd', rng, rounds, quick)


def case_jpeg_loader_yolo(rng, rounds, quick):
    """YOLOv3-416 from JPEG files: a 2-worker DataLoader, decode included."""
    return _jpeg_case('yolo', rng, rounds, quick)


def case_jpeg_loader_center_net(rng, rounds, quick):
    """CenterNet-512 from JPEG files: a 2-worker DataLoader, decode included."""
    return _jpeg_case('center_net', rng, rounds, quick)
