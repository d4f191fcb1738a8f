"""Detection datasets at MS COCO's scale: open time and memory of gluoncv's
``COCODetection`` against :class:`~gluonbatch.detection.DetectionShards`.

A standalone script, not a case of ``python -m benchmarks``: it writes a synthetic COCO of
118,287 images (one small file each) and converts it, so it is run by hand, from the
repository's root::

    python benchmarks/coco_scale.py [--images 118287] [--work DIR] [--workers 2]
                                    [--batch-size 32] [--json PATH]

``--images 200`` checks in seconds that it works. With ``--work DIR`` the data is kept
there and a later run with the same ``--images`` and ``--seed`` measures it again without
writing it; without, it goes to a temporary directory removed at the end.

Notes
-----
**The data** (:func:`write_synthetic_coco`) is COCO 2017 train's shape in gluoncv's
layout: ``annotations/instances_train2017.json`` and ``train2017/<id>.jpg``. Image ids are
COCO's range, sizes COCO's common ones (640x480, 480x640, 640x427, ...), the 80
categories with their real ids (``person`` about 30% of the objects, as in COCO), about
0.9% of the images without objects and the others with a geometric number of objects
(mean 7.33, at most 93; 7.27 per image overall, as COCO's 860,001 boxes over 118,287
images). Each object is a polygon of 6 to 39 vertices (coordinates to 0.01, as COCO's)
with its box and area; the JSON is about as large as COCO's. Every image file holds the
same 64x48 JPEG (hard links): gluoncv reads an image's size from the JSON and only checks
that its file exists, and decoding a small image keeps the epochs about the datasets, not
the decoder. :func:`~gluonbatch.detection.from_coco` converts it (1,000 records a shard).

**A measurement** (:func:`measure`) runs in a fresh interpreter per dataset, so neither
sees the other's memory. Every module either needs is imported first; then the main
process's RSS (``/proc/self/smaps_rollup``) is read, the dataset opened
(``COCODetection(root, splits=('instances_train2017',))`` or ``DetectionShards(path)``,
each with the transform below), the garbage collected and the RSS read again. Then one
full shuffled epoch of a :class:`gluonbatch.DataLoader` (``--workers`` worker processes,
``--batch-size``): the transform keeps each item's label (the image is still read and
decoded) and the batchify function its number of boxes, so the epoch reads every item as
training does and moves almost nothing. Each worker's private memory (``Private_Clean +
Private_Dirty`` of its ``smaps_rollup``: the pages it no longer shares with the main
process) is read when the epoch's first batch has arrived and after its last.
"""
import argparse
import contextlib
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from gluonbatch._core.argtypes import HelpFormatter, non_negative_int, positive_int
from gluonbatch._core.checks import check_choice, check_int
from gluonbatch.detection.sources import COCO_CATEGORIES

__all__ = ['COCO_IMAGES', 'KINDS', 'write_synthetic_coco', 'convert', 'private_memory',
           'labels_only', 'box_counts', 'measure', 'measure_in_child', 'table', 'main']

#: Images in COCO 2017 train.
COCO_IMAGES = 118287
#: The datasets measured: gluoncv's ``COCODetection`` on the files, and the shards.
KINDS = ('gluoncv', 'shards')

_SPLIT = 'train2017'
# COCO's share of images without objects (1,021 of 118,287), and its boxes per image
# with objects (860,001 / 117,266); its most objects in one image
_EMPTY_SHARE = 1021 / 118287
_MEAN_OBJECTS = 860001 / 117266
_MAX_OBJECTS = 93
# COCO's common (width, height)s: most images are 640 pixels on their long side
_SIZES = ((640, 480), (480, 640), (640, 427), (427, 640), (640, 426), (640, 424),
          (640, 640), (500, 375), (640, 512), (612, 612))
_SIZE_SHARES = (0.32, 0.12, 0.14, 0.06, 0.1, 0.08, 0.04, 0.04, 0.05, 0.05)
# a file's hard links stay below ext4's limit (65,000)
_LINKS_PER_FILE = 50000
_MB = 1 << 20


def write_synthetic_coco(root: str, num_images: int = COCO_IMAGES, seed: int = 0) -> dict:
    """Write a synthetic COCO 2017 train of ``num_images`` images under ``root`` in
    gluoncv's layout (the module's notes say what it holds); returns its numbers:
    ``images``, ``empty`` (images without objects), ``boxes`` and ``json_bytes``.

    Raises
    ------
    TypeError, ValueError
        ``num_images`` or ``seed`` not an int >= 0.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     counts = write_synthetic_coco(tmp, num_images=50)
    ...     files = len(os.listdir(os.path.join(tmp, 'train2017')))
    >>> counts['images'], files, counts['boxes'] > 50
    (50, 50, True)
    """
    num_images = check_int(num_images, 'num_images', minimum=0)
    rng = np.random.default_rng(check_int(seed, 'seed', minimum=0))
    root = os.fspath(root)
    for sub in ('annotations', _SPLIT):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    ids = np.sort(rng.choice(590000, num_images, replace=False) + 1).tolist()
    sizes = rng.choice(len(_SIZES), num_images, p=_SIZE_SHARES).tolist()
    images = []
    for number, (image_id, size) in enumerate(zip(ids, sizes)):
        file_name = '%012d.jpg' % image_id
        _link_image(root, number, os.path.join(root, _SPLIT, file_name))
        width, height = _SIZES[size]
        images.append({'license': int(rng.integers(1, 9)), 'file_name': file_name,
                       'coco_url': 'http://images.cocodataset.org/%s/%s' % (_SPLIT, file_name),
                       'height': height, 'width': width,
                       'date_captured': '2013-11-%02d 12:00:00' % (number % 28 + 1),
                       'flickr_url': 'http://farm%d.staticflickr.com/%d.jpg' % (
                           number % 9 + 1, image_id), 'id': image_id})
    path = os.path.join(root, 'annotations', 'instances_%s.json' % _SPLIT)
    boxes = empty = 0
    with open(path, 'w') as out:  # written as it goes: the annotations never all in memory
        out.write('{"info": %s, "licenses": %s, "images": %s, "annotations": [' % (
            json.dumps({'description': 'synthetic COCO 2017 train', 'version': '1.0'}),
            json.dumps([{'id': n, 'name': 'license %d' % n, 'url': ''} for n in range(1, 9)]),
            json.dumps(images)))
        for image in images:
            count = _object_count(rng)
            empty += not count
            for _ in range(count):
                annotation = _annotation(rng, image['width'], image['height'])
                annotation.update(image_id=image['id'], id=boxes + 1)
                out.write((', ' if boxes else '') + json.dumps(annotation))
                boxes += 1
        out.write('], "categories": %s}' % json.dumps(
            [{'supercategory': supercategory, 'id': category_id, 'name': name}
             for category_id, name, supercategory in COCO_CATEGORIES]))
    return {'images': num_images, 'empty': empty, 'boxes': boxes,
            'json_bytes': os.path.getsize(path)}


def _link_image(root, number, path):
    """``path`` as a hard link to the same small JPEG (a new copy every
    ``_LINKS_PER_FILE`` images)."""
    template = os.path.join(root, 'template-%d.jpg' % (number // _LINKS_PER_FILE))
    if not os.path.exists(template):
        with open(template, 'wb') as handle:
            handle.write(_small_jpeg())
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
    os.link(template, path)


def _small_jpeg():
    from PIL import Image

    pixels = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    with tempfile.SpooledTemporaryFile() as encoded:
        Image.fromarray(pixels).save(encoded, 'JPEG', quality=90)
        encoded.seek(0)
        return encoded.read()


def _object_count(rng):
    if rng.random() < _EMPTY_SHARE:
        return 0
    return min(int(rng.geometric(1 / _MEAN_OBJECTS)), _MAX_OBJECTS)


def _annotation(rng, width, height):
    """A polygon inside a ``width`` x ``height`` image (a noisy ellipse of 6 to 39
    vertices in a box of 3% to 80% of each side), with its box, area and category."""
    box_w, box_h = np.exp(rng.uniform(np.log(0.03), np.log(0.8), 2)) * (width, height)
    x0, y0 = rng.uniform(0, width - box_w), rng.uniform(0, height - box_h)
    angles = np.sort(rng.uniform(0, 2 * np.pi, int(rng.integers(6, 40))))
    radius = rng.uniform(0.6, 1.0, angles.size)
    x = np.round(x0 + box_w / 2 * (1 + radius * np.cos(angles)), 2)
    y = np.round(y0 + box_h / 2 * (1 + radius * np.sin(angles)), 2)
    area = abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))) / 2
    # person is about 30% of COCO's objects; the others share the rest
    category = 0 if rng.random() < 0.3 else int(rng.integers(1, len(COCO_CATEGORIES)))
    return {'segmentation': [np.stack([x, y], 1).ravel().tolist()], 'area': round(area, 4),
            'iscrowd': 0, 'bbox': [round(float(v), 2) for v in (
                x.min(), y.min(), x.max() - x.min(), y.max() - y.min())],
            'category_id': COCO_CATEGORIES[category][0]}


def convert(root: str, dst: str) -> str:
    """The synthetic COCO at ``root`` as detection shards in ``dst`` (gluoncv's defaults:
    ``COCODetection``'s items); returns ``dst``'s absolute path."""
    from gluonbatch.detection import from_coco

    return from_coco(root, dst, split=_SPLIT, progress=False)


def private_memory(pid: int) -> dict:
    """Process ``pid``'s memory in bytes from ``/proc/<pid>/smaps_rollup``: ``rss``, ``pss``
    and ``private`` (``Private_Clean + Private_Dirty``: the pages no other process maps).

    >>> memory = private_memory(os.getpid())
    >>> 0 < memory['private'] <= memory['rss']
    True
    """
    fields = {}
    with open('/proc/%d/smaps_rollup' % check_int(pid, 'pid', minimum=1)) as handle:
        for line in handle:
            parts = line.split()
            if len(parts) == 3 and parts[2] == 'kB':
                fields[parts[0].rstrip(':')] = int(parts[1]) * 1024
    return {'rss': fields['Rss'], 'pss': fields['Pss'],
            'private': fields['Private_Clean'] + fields['Private_Dirty']}


def labels_only(image: object, label: object, *rest: object) -> np.ndarray:
    """The transform of the measured epochs: the item's label as an array."""
    return np.asarray(label)


def box_counts(labels: list) -> np.ndarray:
    """The batchify function of the measured epochs: each label's number of boxes."""
    return np.array([len(label) for label in labels], np.int64)


def measure(kind: str, path: str, workers: int = 2, batch_size: int = 32) -> dict:
    """Open dataset ``kind`` (one of :data:`KINDS`) at ``path`` in this process and run an
    epoch over it (the module's notes say how); returns the numbers in bytes and seconds:
    ``open_s``, ``rss_before``, ``rss_opened``, ``items``, ``boxes``, ``epoch_s`` and per
    worker ``pid``, ``start`` and ``end`` (private memory). Meant for a fresh interpreter
    (:func:`measure_in_child`): what this process holds already is in its RSS.

    Raises
    ------
    TypeError, ValueError
        ``kind`` not one of :data:`KINDS`, ``workers`` or ``batch_size`` not an int >= 1.
    """
    check_choice(kind, 'kind', KINDS)
    workers = check_int(workers, 'workers', minimum=1)
    batch_size = check_int(batch_size, 'batch_size', minimum=1)
    # both kinds import everything either needs before the first reading
    from gluoncv.data import COCODetection
    from pycocotools import coco  # noqa: F401 (gluoncv imports it on opening)

    from gluonbatch import DataLoader
    from gluonbatch.detection import DetectionShards

    gc.collect()
    before = private_memory(os.getpid())['rss']
    started = time.perf_counter()
    if kind == 'gluoncv':
        with contextlib.redirect_stdout(sys.stderr):  # pycocotools prints its progress
            dataset = COCODetection(root=path, splits=('instances_%s' % _SPLIT,),
                                    transform=labels_only)
    else:
        dataset = DetectionShards(path, transform=labels_only)
    open_s = time.perf_counter() - started
    gc.collect()
    opened = private_memory(os.getpid())['rss']
    result = {'kind': kind, 'open_s': open_s, 'rss_before': before, 'rss_opened': opened,
              'items': len(dataset), 'boxes': 0, 'batches': 0}
    started = time.perf_counter()
    with DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                    batchify_fn=box_counts) as loader:
        pids = loader.worker_pids
        for counts in loader:
            if not result['batches']:
                start = {pid: private_memory(pid)['private'] for pid in pids}
            result['batches'] += 1
            result['boxes'] += int(np.asarray(counts).sum())
        if not result['batches']:
            raise ValueError('%s at %s holds no items' % (kind, path))
        end = {pid: private_memory(pid)['private'] for pid in pids}
        if loader.restarts:
            raise RuntimeError('a worker was replaced during the epoch: its memory is not '
                               'an epoch\'s')
    result['epoch_s'] = time.perf_counter() - started
    result['workers'] = [{'pid': pid, 'start': start[pid], 'end': end[pid]} for pid in pids]
    return result


def measure_in_child(kind: str, path: str, workers: int = 2, batch_size: int = 32) -> dict:
    """:func:`measure` in a fresh interpreter (this script with ``--child``).

    Raises
    ------
    RuntimeError
        The child failed (its stderr's end is in the message).
    """
    check_choice(kind, 'kind', KINDS)
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, 'report.json')
        done = subprocess.run(
            [sys.executable, os.path.abspath(__file__), '--child', kind, os.fspath(path),
             '--report', report, '--workers', str(workers), '--batch-size', str(batch_size)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode:
            raise RuntimeError('measuring %s failed (exit %d): %s' % (
                kind, done.returncode, done.stderr[-3000:]))
        with open(report) as handle:
            return json.load(handle)


def table(results: dict) -> str:
    """The measurements of :func:`measure` (``{kind: result}``) as a Markdown table; a
    worker's memory is the mean over the workers."""
    names = {'gluoncv': "gluoncv's `COCODetection`", 'shards': '`DetectionShards`'}
    lines = ['| dataset | opens in | main process RSS | each DataLoader worker\'s private '
             'memory over an epoch |', '|---|---|---|---|']
    for kind, result in results.items():
        opened = result['open_s']
        lines.append('| %s | %s | %+.0f MB | %.0f -> %.0f MB |' % (
            names.get(kind, kind), '%.1f s' % opened if opened >= 1 else
            '%.1f ms' % (opened * 1e3), (result['rss_opened'] - result['rss_before']) / _MB,
            np.mean([w['start'] for w in result['workers']]) / _MB,
            np.mean([w['end'] for w in result['workers']]) / _MB))
    return '\n'.join(lines)


def prepare(work: str, images: int, seed: int) -> tuple[str, str, dict]:
    """The synthetic COCO and its shards in ``work``: written, or kept from an earlier run
    with the same ``images`` and ``seed``."""
    root, shards = os.path.join(work, 'coco'), os.path.join(work, 'shards')
    marker, wanted = os.path.join(work, 'synthetic.json'), {'images': images, 'seed': seed}
    if os.path.exists(marker):
        with open(marker) as handle:
            kept = json.load(handle)
        if {name: kept.get(name) for name in wanted} == wanted:
            print('reusing the data in %s' % work, flush=True)
            return root, shards, kept
    if os.path.exists(work) and os.listdir(work):
        raise ValueError('--work %s holds other files: give an empty or new directory, or '
                         'the one of a run with the same --images and --seed' % work)
    started = time.perf_counter()
    counts = write_synthetic_coco(root, images, seed)
    print('wrote %(images)d images, %(boxes)d boxes, JSON %(json_bytes)d bytes' % counts,
          'in %.0f s' % (time.perf_counter() - started), flush=True)
    started = time.perf_counter()
    convert(root, shards)
    print('converted in %.0f s' % (time.perf_counter() - started), flush=True)
    with open(marker, 'w') as handle:
        json.dump(dict(counts, **wanted), handle)
    return root, shards, dict(counts, **wanted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python benchmarks/coco_scale.py',
                                     description=__doc__.split('\n\n')[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument('--images', type=positive_int, default=COCO_IMAGES,
                        help='images in the synthetic COCO')
    parser.add_argument('--seed', type=non_negative_int, default=0, help='seed of the synthetic COCO')
    parser.add_argument('--work', metavar='DIR',
                        help='keep the data in DIR (default: a temporary directory)')
    parser.add_argument('--workers', type=positive_int, default=2,
                        help='DataLoader worker processes')
    parser.add_argument('--batch-size', type=positive_int, default=32)
    parser.add_argument('--json', metavar='PATH', help='write the measurements to PATH')
    parser.add_argument('--child', nargs=2, metavar=('KIND', 'PATH'), help=argparse.SUPPRESS)
    parser.add_argument('--report', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        result = measure(args.child[0], args.child[1], args.workers, args.batch_size)
        with open(args.report, 'w') as handle:
            json.dump(result, handle)
        return 0
    with contextlib.ExitStack() as stack:
        work = args.work or stack.enter_context(tempfile.TemporaryDirectory())
        try:
            root, shards, counts = prepare(os.path.abspath(work), args.images, args.seed)
        except ValueError as err:
            parser.error(str(err))
        results = {}
        for kind, path in zip(KINDS, (root, shards)):
            results[kind] = measure_in_child(kind, path, args.workers, args.batch_size)
    print('%d images, %d boxes; epochs of %d items, %d workers, batch %d, %.0f s and '
          '%.0f s' % (counts['images'], counts['boxes'], results['shards']['items'],
                      args.workers, args.batch_size, results['gluoncv']['epoch_s'],
                      results['shards']['epoch_s']))
    if any(results[kind][name] != results['gluoncv'][name] for kind in KINDS
           for name in ('items', 'boxes')):
        print('the two epochs read different items or boxes: %s' % {
            kind: (r['items'], r['boxes']) for kind, r in results.items()})
    print(table(results))
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump({'data': counts, 'workers': args.workers,
                       'batch_size': args.batch_size, 'results': results}, handle, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
