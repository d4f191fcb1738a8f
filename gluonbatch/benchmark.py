"""Benchmark gluonbatch against gluoncv and against "the floor"; ``make bench``.

How it measures
---------------
* **Contenders.** Every case times three callables on the same inputs: gluonbatch's
  batchify function, gluoncv's (``gluoncv.data.batchify``) and the *floor*. The floor is
  the least any batchify function returning a fresh ``cpu_shared`` NDArray must pay:
  creating that array and writing it once, ``mx.nd.array(src, ctx=cpu_shared(0))``, where
  ``src = np.ones(shape, dtype)`` is prepared outside the timed region (one array per
  output when a batch has several).
* **One timed call** is ``perf_counter`` around the call *and* ``wait_to_read()`` on every
  NDArray it returns (MXNet is asynchronous). The garbage collector is paused during the
  call; the result is dropped and ``mx.nd.waitall()`` lets MXNet finish freeing it before
  the next call starts, so no call pays for its predecessor's output.
* **Interleaved repeats.** One untimed warm-up call per contender (which also checks that
  gluonbatch and gluoncv return the same values), then ``rounds`` rounds; each round runs
  every contender once, in turn, starting from a different contender each round so no
  contender always runs right after the same one. ``gc.collect()`` runs between rounds.
  A contender's time is its median over rounds, so drifts in machine speed (turbo, other
  processes) hit all contenders alike.
* **Host temporaries** (Stack cases) are measured in separate, untimed calls with
  ``tracemalloc``: peak traced memory during the call minus traced memory before it, as a
  percentage of the output's bytes. numpy reports its buffers to tracemalloc; the
  ``cpu_shared`` output is allocated by MXNet in C and is invisible to it, so the peak is
  exactly the host temporaries a call allocates through numpy/Python. Memory MXNet
  allocates internally (e.g. inside ``mx.nd.stack``) is not seen either.

* **The loader case** times whole epochs of the same ``mx.gluon.data.DataLoader`` (2 worker
  processes, detection-style samples) with each contender as its batchify function: one
  untimed warm-up epoch per contender, then ``rounds`` rounds of one epoch per contender,
  interleaved and rotated as above. A contender's time is its median milliseconds per
  batch (epoch time / batches), so ``gluoncv / gluonbatch`` is gluonbatch's batches/s over
  gluoncv's. Its floor is the same loader whose worker makes every batch as the floor
  above does, ``mx.nd.array(src, ctx=cpu_shared(0))`` per output of the batch's shape from
  a source prepared before the workers fork, and passes it back the same way.

* **The webdataset case** reads a sharded image-text dataset (``NNNNN.tar`` + ``.parquet``
  + ``.idx``, small JPEGs) with :class:`gluonbatch.webdataset.ImageTextPairDataset`. Its
  gluonbatch and gluoncv contenders are whole shuffled epochs of the same 2-worker
  DataLoader (random access, JPEG decode, then ``Tuple(Pad(axis=(0, 1)), List(), List())``
  of gluonbatch or gluoncv's ``Pad``); its floor is reading the same tar bytes front to back
  (1 MB reads). Times are per record. Raw record reads (no decode) in random order are
  compared with that sequential read per record (the goal: at most 2x), with the same reads
  in tar order and with a ``tarfile`` stream; resharding throughput with
  ``shutil.copyfile`` of the same tar bytes. Every file is in the page cache (just written).

The output is a report, not a test: goals are printed with PASS/MISS next to the measured
ratio, and the script exits 0 either way. ``--json PATH`` writes the results for plotting;
``--plot PATH`` draws them as a bar chart of the ratios to the floor (:func:`plot_ratios`).

Usage::

    gluonbatch bench [--repeats N] [--quick] [--seed S] [--only CASE] [--json PATH]
                     [--plot PATH]
"""
import argparse
import gc
import importlib.metadata
import json
import operator
import os
import platform
import statistics
import sys
import time
import tracemalloc

import mxnet as mx
import numpy as np

import gluonbatch
import gluonbatch.batchify as gb
import gluoncv
import gluoncv.data.batchify as gcv

SHARED = mx.Context('cpu_shared', 0)

#: Default rounds for cases whose output is large (tens of MB) and small (tens of kB).
BIG_ROUNDS, SMALL_ROUNDS, QUICK_ROUNDS = 15, 50, 3
#: Default rounds (timed epochs per contender) of the loader case.
LOADER_ROUNDS = 3


# --------------------------------------------------------------------------- measurement

def wait_all(result):
    """Wait for every NDArray in ``result`` (an NDArray or nested tuples/lists of them)."""
    if isinstance(result, mx.nd.NDArray):
        result.wait_to_read()
    elif isinstance(result, (tuple, list)):
        for item in result:
            wait_all(item)


def time_call(fn):
    """Seconds taken by ``fn()`` until its result is ready; the result is freed afterwards."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        result = fn()
        wait_all(result)
        elapsed = time.perf_counter() - start
    finally:
        if gc_was_enabled:
            gc.enable()
    del result
    mx.nd.waitall()  # MXNet frees NDArrays on its engine; finish that outside the timing.
    return elapsed


def interleaved_medians(contenders, rounds, times=None):
    """Median seconds per contender over ``rounds`` interleaved rounds.

    Parameters
    ----------
    contenders : dict of str -> callable
        Each callable takes no argument and returns an NDArray (or tuples/lists of them).
    rounds : int
        Each round calls every contender once, in turn; round ``r`` starts at contender
        ``r % len(contenders)``. One untimed warm-up call per contender comes first.
    times : dict, optional
        If given, filled with the list of per-round seconds of every contender.

    Returns
    -------
    dict of str -> float
    """
    names = list(contenders)
    for name in names:
        time_call(contenders[name])
    samples = {name: [] for name in names}
    for round_index in range(rounds):
        gc.collect()
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(time_call(contenders[name]))
    if times is not None:
        times.update(samples)
    return {name: statistics.median(values) for name, values in samples.items()}


def back_to_back_medians(contenders, rounds):
    """Median seconds per contender when each runs ``rounds`` times in a row (warm caches).

    Interleaving makes every call start cold; in a DataLoader worker, batchify calls of one
    kind follow each other. Both views are reported for small cases, where the difference
    is large.
    """
    medians = {}
    for name, fn in contenders.items():
        time_call(fn)
        medians[name] = statistics.median(time_call(fn) for _ in range(rounds))
    return medians


def host_temporaries(fn):
    """Peak bytes ``fn()`` allocates through numpy/Python while it runs (via tracemalloc)."""
    gc.collect()
    mx.nd.waitall()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = fn()
        wait_all(result)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result
    mx.nd.waitall()
    return max(0, peak - before)


def floor_fn(outputs):
    """The floor contender: fresh ``cpu_shared`` arrays for ``outputs`` [(shape, dtype)].

    Sources are made up front, so only creating and writing the outputs is timed.
    """
    sources = [np.ones(shape, dtype) for shape, dtype in outputs]
    return lambda: [mx.nd.array(src, ctx=SHARED) for src in sources]


def leaves(result):
    """The NDArrays of a (nested) batch, in order."""
    if isinstance(result, mx.nd.NDArray):
        return [result]
    return [leaf for item in result for leaf in leaves(item)]


def check_same(case, ours, theirs):
    """Raise unless gluonbatch and gluoncv return the same arrays; return their layout.

    So a case never compares unlike work, and the floor writes exactly the outputs' sizes.
    """
    ours, theirs = leaves(ours), leaves(theirs)
    same = len(ours) == len(theirs) and all(
        a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.asnumpy(), b.asnumpy())
        for a, b in zip(ours, theirs))
    if not same:
        raise AssertionError('%s: gluonbatch returned %s, gluoncv %s' % (
            case, [(a.shape, a.dtype) for a in ours], [(b.shape, b.dtype) for b in theirs]))
    return [(a.shape, np.dtype(a.dtype)) for a in ours]


# --------------------------------------------------------------------------- cases

def ratio_check(metric, value, goal=None):
    """One line of the report: ``value`` is a ratio; goal is ``('>=' or '<=', bound)``."""
    passed = None
    if goal is not None:
        op, bound = goal
        passed = value >= bound if op == '>=' else value <= bound
    return {'metric': metric, 'value': value, 'unit': 'x', 'goal': goal, 'passed': passed}


def percent_check(metric, value, goal=None):
    """One report line for a percentage (host temporaries); goal as in :func:`ratio_check`."""
    return dict(ratio_check(metric, value, goal), unit='%')


def timing_fields(medians, times):
    """The row fields every case reports: medians and per-round times in ms, and the ratios
    of gluonbatch, gluoncv and the floor (``medians`` and ``times`` in seconds)."""
    return {
        'medians_ms': {name: seconds * 1e3 for name, seconds in medians.items()},
        'times_ms': {name: [s * 1e3 for s in values] for name, values in times.items()},
        'ratios': {'gluoncv/gluonbatch': medians['gluoncv'] / medians['gluonbatch'],
                   'gluonbatch/floor': medians['gluonbatch'] / medians['floor'],
                   'gluoncv/floor': medians['gluoncv'] / medians['floor']},
    }


def run_case(case, title, gb_fn, gcv_fn, rounds, samples, temporaries=False,
             back_to_back=False, extra=None):
    """Time the three contenders of one case; return the case's row (without checks).

    With ``temporaries``, also measure each contender's host temporaries (separate calls,
    after the timing) as a percentage of the output bytes. With ``back_to_back``, also the
    medians of consecutive calls (:func:`back_to_back_medians`). ``extra`` maps names to
    more no-argument callables, timed in the same interleaved rounds into ``extra_ms``.
    """
    outputs = check_same(case, gb_fn(samples), gcv_fn(samples))
    contenders = {'gluonbatch': lambda: gb_fn(samples),
                  'gluoncv': lambda: gcv_fn(samples),
                  'floor': floor_fn(outputs)}
    times = {}
    medians = interleaved_medians(dict(contenders, **(extra or {})), rounds, times)
    extra_medians = {name: medians.pop(name) for name in extra or {}}
    extra_times = {name: times.pop(name) for name in extra or {}}
    out_bytes = sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in outputs)
    row = {
        'case': case, 'title': title, 'rounds': rounds,
        'outputs': [[list(shape), dtype.name] for shape, dtype in outputs],
        'out_bytes': out_bytes,
        **timing_fields(medians, times),
    }
    if extra:
        row['extra_ms'] = {name: seconds * 1e3 for name, seconds in extra_medians.items()}
        row['extra_times_ms'] = {name: [s * 1e3 for s in values]
                                 for name, values in extra_times.items()}
    if back_to_back:
        row['back_to_back_ms'] = {name: seconds * 1e3 for name, seconds in
                                  back_to_back_medians(contenders, rounds).items()}
    if temporaries:
        row['host_temporaries_pct'] = {name: 100.0 * host_temporaries(fn) / out_bytes
                                       for name, fn in contenders.items()}
    return row


def case_pad_labels(rng, rounds, quick):
    """Case 1: Pad 32 float32 label arrays of shape (1..50, 6) with -1."""
    lengths = rng.integers(1, 51, size=32)
    samples = [rng.standard_normal((int(n), 6)).astype(np.float32) for n in lengths]
    row = run_case('pad_labels', 'Pad 32 labels (1..50, 6) f32', gb.Pad(pad_val=-1),
                   gcv.Pad(pad_val=-1), rounds, samples,
                   back_to_back=True)
    warm = row['back_to_back_ms']
    row['checks'] = [
        ratio_check('gluoncv / gluonbatch', row['ratios']['gluoncv/gluonbatch'], ('>=', 50)),
        ratio_check('gluonbatch / floor', row['ratios']['gluonbatch/floor']),
        ratio_check('gluoncv / floor', row['ratios']['gluoncv/floor']),
        ratio_check('back-to-back gluoncv/gluonbatch', warm['gluoncv'] / warm['gluonbatch']),
        ratio_check('back-to-back gluonbatch/floor', warm['gluonbatch'] / warm['floor']),
    ]
    return row


def case_pad_images(rng, rounds, quick):
    """Case 2: Pad 8 float32 images 3x(500..600)x(800..1000) on axes (1, 2)."""
    scale = 10 if quick else 1
    heights = rng.integers(500 // scale, 600 // scale + 1, size=8)
    widths = rng.integers(800 // scale, 1000 // scale + 1, size=8)
    samples = [rng.random((3, int(h), int(w)), dtype=np.float32)
               for h, w in zip(heights, widths)]
    title = 'Pad 8 images 3x(%d..%d)x(%d..%d) f32' % (500 // scale, 600 // scale,
                                                      800 // scale, 1000 // scale)
    row = run_case('pad_images', title, gb.Pad(axis=(1, 2)), gcv.Pad(axis=(1, 2)),
                   rounds, samples)
    row['checks'] = [
        ratio_check('gluonbatch / floor', row['ratios']['gluonbatch/floor'], ('<=', 1.2)),
        ratio_check('gluoncv / floor', row['ratios']['gluoncv/floor']),
    ]
    return row


def _stack_case(case, title, samples, rounds):
    """Cases 3 and 4: time Stack and measure host temporaries of every contender."""
    row = run_case(case, title, gb.Stack(), gcv.Stack(), rounds, samples,
                   temporaries=True)
    temporaries = row['host_temporaries_pct']
    row['checks'] = [
        ratio_check('gluonbatch / floor', row['ratios']['gluonbatch/floor'], ('<=', 1.1)),
        ratio_check('gluoncv / floor', row['ratios']['gluoncv/floor']),
        percent_check('gluonbatch host temporaries', temporaries['gluonbatch'], ('<=', 5.0)),
        percent_check('gluoncv host temporaries', temporaries['gluoncv']),
        percent_check('floor host temporaries', temporaries['floor']),
    ]
    return row


def _stack_images(rng, quick):
    """The images of cases 3 and 4 (and their side length): 32 3x512x512, or 8 3x64x64."""
    size = 64 if quick else 512
    count = 8 if quick else 32
    return [rng.random((3, size, size), dtype=np.float32) for _ in range(count)], size


def case_stack_numpy(rng, rounds, quick):
    """Case 3: Stack 32 float32 numpy arrays 3x512x512."""
    samples, size = _stack_images(rng, quick)
    return _stack_case('stack_numpy', 'Stack %d numpy 3x%dx%d f32' % (len(samples), size, size),
                       samples, rounds)


def case_stack_ndarray(rng, rounds, quick):
    """Case 4: the Stack of case 3 with cpu(0) NDArray inputs."""
    images, size = _stack_images(rng, quick)
    samples = [mx.nd.array(image, ctx=mx.cpu(0)) for image in images]
    mx.nd.waitall()
    del images
    return _stack_case('stack_ndarray', 'Stack %d NDArray 3x%dx%d f32'
                       % (len(samples), size, size), samples, rounds)


def _rcnn_case(case, title, model, multi_stage, rng, rounds, quick):
    """Cases 5 and 6: FasterRCNNTrainBatchify, 4 samples of gluoncv's train transform, 2 shards.

    gluonbatch is timed in steady state: its feature-shape cache was filled by the warm-up
    call, as it is after the first batches of each image size in training.
    """
    import warnings
    from gluoncv.data.transforms.presets.rcnn import FasterRCNNDefaultTrainTransform
    from gluoncv.model_zoo import get_model

    net = get_model(model, pretrained=False, pretrained_base=False)
    net.initialize()
    short, max_size = (200, 320) if quick else (600, 1000)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # gluoncv's anchor generator warns about its inputs
        transform = FasterRCNNDefaultTrainTransform(short, max_size, net,
                                                    multi_stage=multi_stage)
    samples = []
    for _ in range(4):
        height, width = (int(v) for v in rng.integers((375, 400), (500, 700)))
        image = mx.nd.array(rng.integers(0, 255, (height, width, 3)), dtype='uint8')
        boxes = np.array([[10, 20, 100, 150, 3], [50, 60, 200, 220, 1]], np.float32)
        samples.append(transform(image, boxes))
    mx.nd.waitall()
    ours = gb.FasterRCNNTrainBatchify(net, num_shards=2)
    row = run_case(case, '%s %d/%d, 4 img, 2 shards' % (title, short, max_size), ours,
                   gcv.FasterRCNNTrainBatchify(net, num_shards=2), rounds, samples)
    info = ours.feature_shapes.cache_info()
    row['cache'] = {'hits': info.hits, 'misses': info.misses}
    row['checks'] = [
        ratio_check('gluoncv / gluonbatch', row['ratios']['gluoncv/gluonbatch'], ('>=', 30)),
        ratio_check('gluonbatch / floor', row['ratios']['gluonbatch/floor']),
        ratio_check('gluoncv / floor', row['ratios']['gluoncv/floor']),
        percent_check('feature-shape cache hit rate', 100.0 * info.hits /
                      max(1, info.hits + info.misses)),
    ]
    return row


def case_rcnn_c4(rng, rounds, quick):
    """Case 5: Faster R-CNN with a C4 backbone (one feature level)."""
    return _rcnn_case('rcnn_c4', 'FasterRCNN C4', 'faster_rcnn_resnet50_v1b_voc', False,
                      rng, rounds, quick)


def case_rcnn_fpn(rng, rounds, quick):
    """Case 6: Faster R-CNN with an FPN backbone (five feature levels)."""
    return _rcnn_case('rcnn_fpn', 'FasterRCNN FPN', 'faster_rcnn_fpn_resnet50_v1b_coco', True,
                      rng, rounds, quick)


class _FloorBatches(mx.gluon.data.Dataset):
    """The loader floor's dataset: in the worker, sample ``b * batch_size`` is batch ``b``.

    That sample is the batch's outputs, made as the floor makes them (a fresh ``cpu_shared``
    array per output, written once from a source of its shape prepared before the workers
    fork); the other samples of the batch are None, and the batchify function,
    ``operator.itemgetter(0)``, returns the first sample.
    """

    def __init__(self, sources, batch_size):
        self._sources = sources
        self._batch_size = batch_size

    def __len__(self):
        return len(self._sources) * self._batch_size

    def __getitem__(self, idx):
        if idx % self._batch_size:
            return None
        batch_sources = self._sources[idx // self._batch_size]
        return tuple(mx.nd.array(src, ctx=SHARED) for src in batch_sources)


def time_epoch(loader):
    """Seconds per batch of one epoch of ``loader``, every batch waited for and dropped."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        batches = 0
        start = time.perf_counter()
        for batch in loader:
            wait_all(batch)
            del batch
            batches += 1
        elapsed = time.perf_counter() - start
    finally:
        if gc_was_enabled:
            gc.enable()
    mx.nd.waitall()
    return elapsed / batches


def case_loader(rng, rounds, quick):
    """Case 7: batches/s of a 2-worker DataLoader, gluonbatch's batchify vs gluoncv's.

    256 detection-style samples (a float32 image 3x416x416 and 1..50 float32 box rows of 6),
    batch size 16, ``Tuple(Stack(), Pad(pad_val=-1))``; whole epochs, interleaved.
    """
    count, size, batch_size, workers = (32, 64, 8, 2) if quick else (256, 416, 16, 2)
    samples = [(rng.random((3, size, size), dtype=np.float32),
                rng.random((int(rows), 6), dtype=np.float32))
               for rows in rng.integers(1, 51, size=count)]
    batches = [samples[start:start + batch_size] for start in range(0, count, batch_size)]
    gb_fn = gb.Tuple(gb.Stack(), gb.Pad(pad_val=-1))
    gcv_fn = gcv.Tuple(gcv.Stack(), gcv.Pad(pad_val=-1))
    layouts = [check_same('loader', gb_fn(batch), gcv_fn(batch)) for batch in batches]
    outputs = layouts[0]
    # the floor's sources: one for the images (every batch has the same image shape) and one
    # per batch for its padded boxes
    image_source = np.ones(*layouts[0][0])
    sources = [[image_source] + [np.ones(shape, dtype) for shape, dtype in layout[1:]]
               for layout in layouts]
    mx.nd.waitall()

    def loader(dataset, batchify_fn):
        return mx.gluon.data.DataLoader(dataset, batch_size=batch_size, shuffle=False,
                                        last_batch='keep', batchify_fn=batchify_fn,
                                        num_workers=workers)

    data = mx.gluon.data.SimpleDataset(samples)
    loaders = {'gluonbatch': loader(data, gb_fn), 'gluoncv': loader(data, gcv_fn),
               'floor': loader(_FloorBatches(sources, batch_size), operator.itemgetter(0))}
    names = list(loaders)
    for name in names:
        time_epoch(loaders[name])  # warm-up: worker pools running, memory touched
    times = {name: [] for name in names}
    for round_index in range(rounds):
        gc.collect()
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(time_epoch(loaders[name]))
    del loaders
    gc.collect()
    medians = {name: statistics.median(values) for name, values in times.items()}
    out_bytes = statistics.mean(sum(int(np.prod(shape)) * dtype.itemsize
                                    for shape, dtype in layout) for layout in layouts)
    row = {
        'case': 'loader',
        'title': 'Loader %d workers, %d x 3x%dx%d, B=%d' % (workers, count, size, size,
                                                            batch_size),
        'rounds': rounds, 'unit': 'ms per batch; rounds are epochs of %d batches'
                                  % len(batches),
        'outputs': [[list(shape), dtype.name] for shape, dtype in outputs],
        'out_bytes': out_bytes,
        'batches_per_s': {name: 1.0 / seconds for name, seconds in medians.items()},
        **timing_fields(medians, times),
    }
    row['checks'] = [
        ratio_check('batches/s gluonbatch / gluoncv', row['ratios']['gluoncv/gluonbatch']),
        ratio_check('loader gluonbatch / floor', row['ratios']['gluonbatch/floor']),
        ratio_check('loader gluoncv / floor', row['ratios']['gluoncv/floor']),
    ]
    return row


def _read_front_to_back(paths):
    """Read every file in 1 MB chunks into one buffer (the sequential floor)."""
    buf = bytearray(1 << 20)
    for path in paths:
        with open(path, 'rb', buffering=0) as handle:
            while handle.readinto(buf):
                pass


def _stream_tars(paths):
    """Read every member of every tar in order with ``tarfile`` (a sequential reader)."""
    import tarfile
    for path in paths:
        with tarfile.open(path, 'r:') as tar:
            for info in tar:
                tar.extractfile(info).read()


def case_webdataset(rng, rounds, quick):
    """Case 8: records/s of an ImageTextPairDataset through a 2-worker DataLoader.

    2,000 records (200 with ``--quick``) of 64..128 px JPEGs, a caption and JSON metadata in
    4 shards with ``.idx`` files; batch size 32, shuffled, ``Tuple(Pad(axis=(0, 1)), List(),
    List())``. Also raw random reads vs sequential reads per record, and resharding MB/s vs
    a file copy.
    """
    import shutil
    import tempfile
    from gluonbatch.webdataset import ImageTextPairDataset, make_example_dataset

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
        contenders = {name: (lambda ld=ld: time_epoch(ld) * batches)
                      for name, ld in loaders.items()}
        contenders['floor'] = lambda: time_call(lambda: _read_front_to_back(tars))
        order = list(range(count))

        def raw_reads(indices):
            start = time.perf_counter()
            for i in indices:
                ds.read_raw(i)
            return time.perf_counter() - start

        def reshard(round_index):
            target = os.path.join(root, 'reshard%d' % round_index)
            start = time.perf_counter()
            ds.to_webdataset(target, None, samples_per_shard=count // shards)
            elapsed = time.perf_counter() - start
            shutil.rmtree(target)
            return elapsed

        def copy(round_index):
            target = os.path.join(root, 'copy%d' % round_index)
            os.makedirs(target)
            start = time.perf_counter()
            for path in tars:
                shutil.copyfile(path, os.path.join(target, os.path.basename(path)))
            elapsed = time.perf_counter() - start
            shutil.rmtree(target)
            return elapsed

        extras = {'random': lambda r: raw_reads(rng.permutation(count).tolist()),
                  'in_order': lambda r: raw_reads(order),
                  'tarfile_stream': lambda r: time_call(lambda: _stream_tars(tars)),
                  'reshard': reshard, 'copyfile': copy}
        names = list(contenders)
        for name in names:  # warm-up: worker pools running, every record read once
            contenders[name]()
        for name in extras:
            extras[name](-1)
        times = {name: [] for name in names}
        extra_times = {name: [] for name in extras}
        for round_index in range(rounds):
            gc.collect()
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                times[name].append(contenders[name]() / count)
            for name, fn in extras.items():
                extra_times[name].append(fn(round_index))
        del loaders, contenders
        gc.collect()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in times.items()}
    extra = {name: statistics.median(values) for name, values in extra_times.items()}
    raw_us = {name: extra[name] / count * 1e6
              for name in ('random', 'in_order', 'tarfile_stream')}
    raw_us['sequential'] = medians['floor'] * 1e6
    reshard_mb_s, copy_mb_s = tar_bytes / extra['reshard'] / 1e6, tar_bytes / extra['copyfile'] / 1e6
    row = {
        'case': 'webdataset',
        'title': 'WebDataset %d rec, %d workers, B=%d' % (count, workers, batch_size),
        'rounds': rounds,
        'unit': 'ms per record; rounds are shuffled epochs of %d records' % count,
        'outputs': [[list(shape), dtype.name] for shape, dtype in outputs],
        'out_bytes': sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in outputs),
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
    ]
    return row


def in_memory_mode(mode, fn, samples):
    """``fn(samples)`` under the memory setting ``mode`` (the setting is restored)."""
    from . import memory

    def call():
        previous = memory._mode
        memory.set_memory(mode)
        try:
            return fn(samples)
        finally:
            memory._mode = previous
    return call


def case_memory(rng, rounds, quick):
    """Case 9: Stack and Pad of image batches in the main process, memory 'shared' vs 'auto'.

    With ``'auto'`` the main process batches into ordinary memory, whose fresh pages cost
    less than fresh shared pages.
    """
    images, size = _stack_images(rng, quick)
    scale = 10 if quick else 1
    padded = [rng.random((3, int(h), int(w)), dtype=np.float32) for h, w in zip(
        rng.integers(500 // scale, 600 // scale + 1, size=8),
        rng.integers(800 // scale, 1000 // scale + 1, size=8))]
    pad = gb.Pad(axis=(1, 2))
    row = run_case('memory', 'Stack %d 3x%dx%d in the main process' % (len(images), size, size),
                   gb.Stack(), gcv.Stack(), rounds, images,
                   extra={'stack auto': in_memory_mode('auto', gb.Stack(), images),
                          'pad shared': in_memory_mode('shared', pad, padded),
                          'pad auto': in_memory_mode('auto', pad, padded)})
    ms = dict(row['extra_ms'], **{'stack shared': row['medians_ms']['gluonbatch']})
    row['checks'] = [
        ratio_check('Stack shared / auto', ms['stack shared'] / ms['stack auto']),
        ratio_check('Pad (1, 2) shared / auto', ms['pad shared'] / ms['pad auto']),
        ratio_check('Stack shared / floor', row['ratios']['gluonbatch/floor']),
    ]
    return row


#: (case function, default rounds) in report order.
CASES = ((case_pad_labels, SMALL_ROUNDS), (case_pad_images, BIG_ROUNDS),
         (case_stack_numpy, BIG_ROUNDS), (case_stack_ndarray, BIG_ROUNDS),
         (case_rcnn_c4, BIG_ROUNDS), (case_rcnn_fpn, BIG_ROUNDS),
         (case_loader, LOADER_ROUNDS), (case_webdataset, LOADER_ROUNDS),
         (case_memory, BIG_ROUNDS))


# --------------------------------------------------------------------------- report

def _version(distribution, module):
    """Installed distribution version (gluoncv's ``__version__`` misreports 0.10.5 as 0.11.0)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return getattr(module, '__version__', 'unknown')


def machine_facts():
    """Versions and CPU facts printed at the top of the report and stored in the JSON."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {'python': platform.python_version(), 'platform': platform.platform(),
            'processor': platform.processor() or platform.machine(),
            'cpu_count': os.cpu_count(), 'cpus_usable': usable,
            'mxnet': _version('mxnet', mx), 'numpy': _version('numpy', np),
            'gluoncv': _version('gluoncv', gluoncv),
            'gluonbatch': _version('gluonbatch', gluonbatch),
            'load_average_1m': os.getloadavg()[0],
            'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS'),
            'MXNET_CPU_WORKER_NTHREADS': os.environ.get('MXNET_CPU_WORKER_NTHREADS')}


def format_value(check):
    """``12.3x`` / ``0.4%`` style rendering of a check's value."""
    if check['unit'] == '%':
        return '%.1f%%' % check['value']
    return '%.2fx' % check['value'] if check['value'] < 10 else '%.1fx' % check['value']


def format_goal(check):
    """The goal column: ``>= 50x``, ``<= 5%`` or ``-`` for information-only lines."""
    if check['goal'] is None:
        return '-'
    op, bound = check['goal']
    return '%s %g%s' % (op, bound, check['unit'])


def format_report(facts, rows, quick):
    """The printed report: machine facts, a table of medians, a table of ratios and goals."""
    lines = ['gluonbatch benchmark%s' % (' (QUICK smoke mode: small sizes, few rounds; '
                                        'goals are not meaningful)' if quick else ''),
             'machine: %s cpus (%s usable), %s, python %s, load average %.2f at start'
             % (facts['cpu_count'], facts['cpus_usable'], facts['processor'], facts['python'],
                facts['load_average_1m']),
             'versions: mxnet %s, numpy %s, gluoncv %s, gluonbatch %s'
             % (facts['mxnet'], facts['numpy'], facts['gluoncv'], facts['gluonbatch']),
             'floor = mx.nd.array(np.ones(shape), ctx=cpu_shared(0)) per output; times are medians '
             'of interleaved rounds, ms']
    if any(row['case'] == 'loader' for row in rows):
        lines.append('loader: ms per batch over whole epochs of a 2-worker DataLoader (rounds are '
                     'epochs); its floor makes each batch that way in the worker')
    for row in rows:
        if row['case'] == 'webdataset':
            raw = row['raw_read_us_per_record']
            lines.append('webdataset: ms per record over shuffled epochs of a 2-worker DataLoader '
                         '(read + decode + batchify); its floor reads the tar bytes front to back')
            lines.append('webdataset: %.0f records/s; raw reads per record: random %.1f us, in '
                         'order %.1f us, sequential bytes %.2f us, tarfile stream %.1f us; '
                         'reshard %.0f MB/s, copyfile %.0f MB/s'
                         % (row['records_per_s']['gluonbatch'], raw['random'], raw['in_order'],
                            raw['sequential'], raw['tarfile_stream'], row['reshard_mb_per_s'],
                            row['copyfile_mb_per_s']))
    lines.append('')
    header = '%-3s %-42s %6s %8s %11s %11s %11s' % ('#', 'case', 'rounds', 'out MB',
                                                       'gluonbatch', 'gluoncv', 'floor')
    lines += [header, '-' * len(header)]
    for row in rows:
        ms = row['medians_ms']
        lines.append('%-3d %-42s %6d %8.2f %11.3f %11.3f %11.3f'
                     % (row['number'], row['title'], row['rounds'], row['out_bytes'] / 1e6,
                        ms['gluonbatch'], ms['gluoncv'], ms['floor']))
    lines.append('')
    header = '%-3s %-32s %10s %10s  %s' % ('#', 'metric', 'measured', 'goal', 'result')
    lines += [header, '-' * len(header)]
    for row in rows:
        for check in row['checks']:
            result = {True: 'PASS', False: 'MISS', None: 'info'}[check['passed']]
            lines.append('%-3d %-32s %10s %10s  %s' % (row['number'], check['metric'],
                                                      format_value(check), format_goal(check),
                                                      result))
    missed = sum(check['passed'] is False for row in rows for check in row['checks'])
    total = sum(check['passed'] is not None for row in rows for check in row['checks'])
    lines += ['', '%d of %d goals met' % (total - missed, total)]
    return '\n'.join(lines)


def json_ready(facts, rows, quick, seed):
    """The results as plain JSON data (goals become ``{"op": ..., "bound": ...}``)."""
    cases = []
    for row in rows:
        row = dict(row, checks=[dict(check) for check in row['checks']])
        for check in row['checks']:
            if check['goal'] is not None:
                check['goal'] = {'op': check['goal'][0], 'bound': check['goal'][1]}
        cases.append(row)
    return {'machine': facts, 'quick': quick, 'seed': seed, 'cases': cases}


def plot_ratios(results, path, title=None):
    """Write a bar chart of every case's time over the floor's to the PNG ``path``.

    Two bars per case, ``gluonbatch / floor`` and ``gluoncv / floor`` (lower is better, 1
    is the floor), on a logarithmic axis; cases without both ratios are left out.

    Parameters
    ----------
    results : dict
        The results as ``--json`` writes them: ``{'machine': {...}, 'cases': [...]}``, each
        case with ``'case'`` and ``'ratios'``.
    path : str
        Where the PNG goes.
    title : str, optional
        The chart's title (default: a line naming the machine's CPUs and the mode).

    Returns
    -------
    str
        ``path``.
    """
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    cases = [case for case in results['cases']
             if {'gluonbatch/floor', 'gluoncv/floor'} <= set(case.get('ratios', {}))]
    if not cases:
        raise ValueError('no case with gluonbatch/floor and gluoncv/floor ratios to plot')
    machine = results.get('machine', {})
    if title is None:
        title = 'time / floor per case (lower is better; %s CPUs, python %s%s)' % (
            machine.get('cpus_usable', '?'), machine.get('python', '?'),
            ', QUICK mode' if results.get('quick') else '')
    names = [case['case'] for case in cases]
    positions = np.arange(len(cases))
    height = 0.38
    figure, axis = plt.subplots(figsize=(8, 0.55 * len(cases) + 1.4))
    for offset, (key, label, color) in enumerate((
            ('gluonbatch/floor', 'gluonbatch / floor', 'tab:blue'),
            ('gluoncv/floor', 'gluoncv / floor', 'tab:orange'))):
        values = [case['ratios'][key] for case in cases]
        bars = axis.barh(positions + (offset - 0.5) * height, values, height, label=label,
                         color=color)
        axis.bar_label(bars, labels=['%.2fx' % v if v < 10 else '%.0fx' % v for v in values],
                       padding=3, fontsize=8)
    axis.axvline(1.0, color='black', linewidth=1, linestyle='--')
    axis.set_xscale('log')
    axis.set_yticks(positions, names)
    axis.invert_yaxis()
    axis.set_xlabel('median time / floor time (log scale; 1 = the floor)')
    axis.set_title(title, fontsize=10)
    axis.legend(loc='lower right', fontsize=8)
    axis.margins(x=0.15)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def parse_args(argv):
    """Command-line options."""
    parser = argparse.ArgumentParser(prog='gluonbatch bench', description=__doc__.split('\n\n')[0])
    parser.add_argument('--repeats', type=int, default=None, metavar='N',
                        help='interleaved rounds per case (default: %d for the small case, '
                             '%d for the large ones, %d with --quick)'
                             % (SMALL_ROUNDS, BIG_ROUNDS, QUICK_ROUNDS))
    parser.add_argument('--quick', action='store_true',
                        help='smoke mode: small inputs and few rounds (for tests)')
    parser.add_argument('--seed', type=int, default=0, help='RNG seed for the inputs')
    parser.add_argument('--only', action='append', metavar='CASE',
                        choices=[fn.__name__[len('case_'):] for fn, _ in CASES],
                        help='run only this case (repeatable): %(choices)s')
    parser.add_argument('--json', metavar='PATH', help='also write the results as JSON here')
    parser.add_argument('--plot', metavar='PATH',
                        help='also draw a bar chart of the ratios to the floor (PNG) here')
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error('--repeats must be at least 1')
    return args


def main(argv=None):
    """Run every case, print the report, optionally write JSON; returns 0 (a report)."""
    args = parse_args(argv)
    facts = machine_facts()
    rows = []
    for number, (case_fn, default_rounds) in enumerate(CASES):
        if args.only and case_fn.__name__[len('case_'):] not in args.only:
            continue
        rounds = args.repeats or (QUICK_ROUNDS if args.quick else default_rounds)
        rng = np.random.default_rng([args.seed, number])
        row = case_fn(rng, rounds, args.quick)
        row['number'] = number + 1
        rows.append(row)
        gc.collect()
    print(format_report(facts, rows, args.quick))
    results = json_ready(facts, rows, args.quick, args.seed)
    if args.json:
        with open(args.json, 'w', encoding='utf-8') as handle:
            json.dump(results, handle, indent=1)
            handle.write('\n')
    if args.plot:
        plot_ratios(results, args.plot)
    return 0


if __name__ == '__main__':
    sys.exit(main())
