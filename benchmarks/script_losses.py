"""Run gluoncv's detection training scripts before and after the change to gluonbatch's
batch-target batchifiers, and compare their logged losses iteration by iteration.

Usage, from the repository's root::

    python -m benchmarks.script_losses DIR [--cases ssd,yolo3,center_net] [--images 24]

``DIR`` holds gluoncv's ``train_ssd.py``, ``train_yolo3.py`` and ``train_center_net.py``
(gluoncv's repository, ``scripts/detection/{ssd,yolo,center_net}/``). This file does not
contain them; it changes copies of them by replacing whole lines (:data:`EDITS`) and fails
if a line to replace is not in the script exactly once.

What a run does:

1. Writes a small synthetic Pascal VOC dataset (``VOC2007`` and ``VOC2012`` trainval,
   ``VOC2007`` test) under a temporary ``HOME``, where the scripts look by default
   (``~/.mxnet/datasets/voc``): noise images with filled rectangles of VOC classes, the
   rectangles being the annotated boxes.
2. Runs each script before the change (unchanged, or with only its presets' import
   swapped to gluonbatch's where the change needs gluonbatch's presets: :data:`CASES`)
   and after it, in its own process on the CPU, with the same
   arguments and seed: one epoch, ``--num-workers 0``, ``--log-interval 1``, small
   networks. A launcher runs the script with :func:`runpy.run_path` after patching, the
   same way for both runs, ``gluoncv.model_zoo.get_model``: it turns ``pretrained`` and
   ``pretrained_base`` to ``False`` where given (so that no weights are downloaded; the
   networks start from the seeded random initialization). Two more patches only record,
   for the table: ``mx.metric.Loss.get`` writes down the full-precision value it
   returns, and the DataLoaders save every batch they yield. The training loop is not
   touched.
3. Prints, per case, a table: the iteration, the losses each run logged (3 decimals, as
   the scripts log them), whether the logged values are equal, the largest absolute
   difference of the full-precision values, and the largest absolute difference of the
   two runs' batches (the image field; the target fields).

The DataLoader runs in the main process (``--num-workers 0``), so the random draws of the
augmentations follow the seed in both runs alike. ``--script-args '--lr 0'`` keeps the
weights at their initial values: each iteration's losses then depend on its batch alone,
not on the updates before it.
"""
import argparse
import hashlib
import json
import os
import re
import runpy
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

from gluonbatch._core.argtypes import HelpFormatter

__all__ = ['EDITS', 'CASES', 'apply_edits', 'write_voc', 'main']

# --------------------------------------------------------------------------- the changes

_SSD_BATCHIFY = ('from gluoncv.data.batchify import Tuple, Stack, Pad',
                 ['from gluonbatch.batchify import Tuple, Stack, Pad, SSDTrainBatchify'])
_SSD_PRESETS = [
    ('from gluoncv.data.transforms.presets.ssd import SSDDefaultTrainTransform',
     ['from gluonbatch.transforms.presets.ssd import SSDDefaultTrainTransform, '
      'SSDDefaultValTransform']),
    ('from gluoncv.data.transforms.presets.ssd import SSDDefaultValTransform', []),
]
_SSD_STACK = ('    batchify_fn = Tuple(Stack(), Stack(), Stack())  '
              '# stack image, cls_targets, box_targets')
_SSD_TRANSFORM = ('        train_dataset.transform(SSDDefaultTrainTransform(width, height, '
                  'anchors)),')
_SSD_NO_ANCHORS = ['        train_dataset.transform(SSDDefaultTrainTransform(width, height)),']

_YOLO_STACK = ('    batchify_fn = Tuple(*([Stack() for _ in range(6)] + [Pad(axis=0, pad_val=-1) '
               'for _ in range(1)]))  # stack image, all targets generated')

_CENTER_NET_PRESETS = [
    ('from gluoncv.data.transforms.presets.center_net import CenterNetDefaultTrainTransform',
     ['from gluonbatch.transforms.presets.center_net import CenterNetDefaultTrainTransform']),
]

#: Per set of edits: ``[(line of the script, [lines that replace it]), ...]``; lines are
#: whole lines without their newline, indentation included.
EDITS = {
    # gluoncv's presets made without anchors, the targets computed by the batchify function
    'ssd': [_SSD_BATCHIFY,
            (_SSD_STACK, ['    batchify_fn = SSDTrainBatchify(anchors)']),
            (_SSD_TRANSFORM, _SSD_NO_ANCHORS)],
    # the presets' import swapped to gluonbatch's, nothing else
    'ssd-presets-only': _SSD_PRESETS,
    # gluonbatch's presets without anchors + the batchify function
    'ssd-presets': [_SSD_BATCHIFY] + _SSD_PRESETS + [
        (_SSD_STACK, ['    batchify_fn = SSDTrainBatchify(anchors)']),
        (_SSD_TRANSFORM, _SSD_NO_ANCHORS)],
    'yolo3': [
        ('from gluoncv.data.batchify import Tuple, Stack, Pad',
         ['from gluonbatch.batchify import Tuple, Stack, Pad, YOLO3TrainBatchify']),
        (_YOLO_STACK, ['    batchify_fn = YOLO3TrainBatchify(net, mixup=args.mixup)']),
        ('            train_dataset.transform(YOLO3DefaultTrainTransform(width, height, net, '
         'mixup=args.mixup)),',
         ['            train_dataset.transform(YOLO3DefaultTrainTransform(width, height, '
          'mixup=args.mixup)),']),
        ('        transform_fns = [YOLO3DefaultTrainTransform(x * 32, x * 32, net, '
         'mixup=args.mixup) for x in range(10, 20)]',
         ['        transform_fns = [YOLO3DefaultTrainTransform(x * 32, x * 32, '
          'mixup=args.mixup) for x in range(10, 20)]']),
    ],
    # the presets' import swapped to gluonbatch's, nothing else
    'center_net-presets-only': _CENTER_NET_PRESETS,
    # gluonbatch's preset with targets=False + the batchify function
    'center_net': [
        ('from gluoncv.data.batchify import Tuple, Stack, Pad',
         ['from gluonbatch.batchify import Tuple, Stack, Pad, CenterNetTrainBatchify']),
        ('    batchify_fn = Tuple([Stack() for _ in range(6)])  # stack image, cls_targets, '
         'box_targets',
         ['    batchify_fn = CenterNetTrainBatchify(num_class, net.scale)']),
        ('            width, height, num_class=num_class, scale_factor=net.scale)),',
         ['            width, height, num_class=num_class, scale_factor=net.scale, '
          'targets=False)),']),
    ] + _CENTER_NET_PRESETS,
}

_COMMON = ['--dataset', 'voc', '--epochs', '1', '--num-workers', '0', '--log-interval', '1',
           '--gpus', '', '--seed', '233', '--save-interval', '0']
_SSD_ARGS = ['--network', 'mobilenet0.25', '--data-shape', '300']
_YOLO_ARGS = ['--network', 'mobilenet0.25', '--data-shape', '320']

#: Per case: the script, its arguments (besides ``--batch-size``), the edits of the
#: baseline run (None: the script unchanged), the edits of the changed run, and what the
#: case shows. The baseline of a case is the script as it was before the change it shows.
CASES = {
    'ssd': ('train_ssd.py', _SSD_ARGS, None, 'ssd',
            "gluoncv's SSD presets (no anchors) + SSDTrainBatchify(anchors), against the "
            "script unchanged"),
    'ssd-presets': ('train_ssd.py', _SSD_ARGS, 'ssd-presets-only', 'ssd-presets',
                    "gluonbatch's SSD presets (no anchors) + SSDTrainBatchify(anchors), "
                    "against the script with gluonbatch's presets"),
    'yolo3': ('train_yolo3.py', _YOLO_ARGS, None, 'yolo3',
              "gluoncv's YOLOv3 presets (no net), random shapes + YOLO3TrainBatchify(net), "
              "against the script unchanged"),
    'yolo3-fixed-shape': ('train_yolo3.py', _YOLO_ARGS + ['--no-random-shape'], None, 'yolo3',
                          "the same with --no-random-shape"),
    'center_net': ('train_center_net.py',
                   ['--network', 'resnet18_v1b', '--data-shape', '256'],
                   'center_net-presets-only', 'center_net',
                   "gluonbatch's CenterNet train preset (targets=False) + "
                   "CenterNetTrainBatchify(num_class, net.scale), against the script with "
                   "gluonbatch's preset (gluoncv's has no targets=False)"),
}


def apply_edits(text, edits, name='script'):
    """``text`` with every ``(line, replacement lines)`` of ``edits`` applied.

    Each line must occur exactly once as a whole line of ``text``; otherwise
    ``ValueError`` names it.

    Examples
    --------
    >>> apply_edits('a = 1\\nb = 2\\n', [('b = 2', ['b = 3', 'c = 4'])])
    'a = 1\\nb = 3\\nc = 4\\n'
    """
    lines = text.split('\n')
    for old, new in edits:
        where = [i for i, line in enumerate(lines) if line == old]
        if len(where) != 1:
            raise ValueError('%s: the line to replace is found %d times, expected once:\n%s'
                             % (name, len(where), old))
        lines[where[0]:where[0] + 1] = list(new)
    return '\n'.join(lines)


# --------------------------------------------------------------------------- the dataset

_CLASSES = ('aeroplane', 'bicycle', 'bird', 'boat', 'bottle', 'bus', 'car', 'cat', 'chair',
            'cow', 'diningtable', 'dog', 'horse', 'motorbike', 'person', 'pottedplant',
            'sheep', 'sofa', 'train', 'tvmonitor')


def _annotation(name, width, height, objects):
    root = ET.Element('annotation')
    ET.SubElement(root, 'filename').text = name + '.jpg'
    size = ET.SubElement(root, 'size')
    for key, value in (('width', width), ('height', height), ('depth', 3)):
        ET.SubElement(size, key).text = str(value)
    for cls, (xmin, ymin, xmax, ymax) in objects:
        obj = ET.SubElement(root, 'object')
        ET.SubElement(obj, 'name').text = cls
        ET.SubElement(obj, 'difficult').text = '0'
        box = ET.SubElement(obj, 'bndbox')
        # VOC coordinates are 1-based pixels; gluoncv subtracts 1 when it reads them
        for key, value in zip(('xmin', 'ymin', 'xmax', 'ymax'), (xmin, ymin, xmax, ymax)):
            ET.SubElement(box, key).text = str(value + 1)
    return ET.tostring(root, encoding='unicode')


def write_voc(root, splits, seed=0):
    """Write a synthetic VOCdevkit under ``root``.

    ``splits`` maps ``(year, split)`` to a number of images. Each image is uniform noise
    with one to three rectangles, each filled with one colour and annotated as a random
    VOC class; ``ImageSets/Main/{split}.txt`` lists the split's images.
    """
    import cv2
    import numpy as np

    rng = np.random.RandomState(seed)
    for (year, split), count in sorted(splits.items()):
        folder = os.path.join(root, 'VOC%d' % year)
        for sub in ('Annotations', 'JPEGImages', os.path.join('ImageSets', 'Main')):
            os.makedirs(os.path.join(folder, sub), exist_ok=True)
        names = []
        for index in range(count):
            name = '%d_%s_%06d' % (year, split, index)
            width, height = int(rng.randint(240, 400)), int(rng.randint(200, 340))
            image = rng.randint(0, 256, (height, width, 3)).astype(np.uint8)
            objects = []
            for _ in range(rng.randint(1, 4)):
                w = int(rng.randint(width // 6, width // 2))
                h = int(rng.randint(height // 6, height // 2))
                x, y = int(rng.randint(0, width - w)), int(rng.randint(0, height - h))
                image[y:y + h, x:x + w] = rng.randint(0, 256, 3)
                objects.append((_CLASSES[rng.randint(len(_CLASSES))], (x, y, x + w, y + h)))
            cv2.imwrite(os.path.join(folder, 'JPEGImages', name + '.jpg'), image)
            with open(os.path.join(folder, 'Annotations', name + '.xml'), 'w') as handle:
                handle.write(_annotation(name, width, height, objects))
            names.append(name)
        with open(os.path.join(folder, 'ImageSets', 'Main', split + '.txt'), 'w') as handle:
            handle.write('\n'.join(names) + '\n')


# --------------------------------------------------------------------------- the launcher

def _launch(script, record, argv):
    """Run ``script`` as ``__main__`` with ``argv``, pretrained weights off, the
    full-precision values of ``mx.metric.Loss.get`` appended to ``record`` (JSON lines)
    and the DataLoaders' batches saved beside it (``batches/``)."""
    import mxnet as mx
    import gluoncv.model_zoo

    original_get_model = gluoncv.model_zoo.get_model

    def get_model(name, **kwargs):
        # only the keywords the caller gives: gluoncv's own calls pass through here too
        for key in ('pretrained', 'pretrained_base'):
            if key in kwargs:
                kwargs[key] = False
        return original_get_model(name, **kwargs)

    gluoncv.model_zoo.get_model = get_model
    original_get = mx.metric.Loss.get

    def get(self):
        name, value = original_get(self)
        with open(record, 'a') as handle:
            handle.write(json.dumps([name, float(value)]) + '\n')
        return name, value

    mx.metric.Loss.get = get
    _record_batches(os.path.join(os.path.dirname(record), 'batches'))
    sys.argv = [script] + list(argv)
    runpy.run_path(script, run_name='__main__')


def _record_batches(folder):
    """Save every batch the scripts' DataLoaders yield, in order, one ``.npz`` each.

    Reading a batch back (``asnumpy``) waits for it; it changes neither the batch nor any
    random generator."""
    import numpy as np
    from mxnet.gluon.data import DataLoader
    from gluoncv.data.dataloader import RandomTransformDataLoader

    os.makedirs(folder)
    count = [0]

    def wrap(original):
        def __iter__(self):
            for batch in original(self):
                fields = batch if isinstance(batch, (list, tuple)) else [batch]
                np.savez(os.path.join(folder, '%05d.npz' % count[0]),
                         *[field.asnumpy() for field in fields])
                count[0] += 1
                yield batch
        return __iter__

    for cls in (DataLoader, RandomTransformDataLoader):
        cls.__iter__ = wrap(vars(cls)['__iter__'])


def _run(script, argv, home, workdir):
    """Run ``script`` through the launcher in a new process: ``(log lines, recorded
    values, seconds, batch files)``."""
    from .harness import python_env

    os.makedirs(workdir)
    record = os.path.join(workdir, 'losses.jsonl')
    env = dict(python_env(), HOME=home, PYTHONHASHSEED='0')
    command = ([sys.executable, '-m', 'benchmarks.script_losses', '_launch', script, record,
                '--'] + argv)
    start = time.time()
    with open(os.path.join(workdir, 'output.txt'), 'w') as output:
        code = subprocess.call(command, cwd=workdir, env=env, stdout=output,
                               stderr=subprocess.STDOUT)
    seconds = time.time() - start
    with open(os.path.join(workdir, 'output.txt')) as handle:
        text = handle.read()
    if code:
        raise RuntimeError('%s %s failed (exit %d):\n%s' % (script, ' '.join(argv), code,
                                                            text[-4000:]))
    values = []
    if os.path.exists(record):
        with open(record) as handle:
            values = [json.loads(line) for line in handle if line.strip()]
    batches = os.path.join(workdir, 'batches')
    return text.splitlines(), values, seconds, [os.path.join(batches, name) for name in
                                                sorted(os.listdir(batches))]


# --------------------------------------------------------------------------- the tables

_BATCH = re.compile(r'\[Epoch (\d+)\]\[Batch (\d+)\]')
_EPOCH = re.compile(r'\[Epoch (\d+)\] Training cost')
_PAIR = re.compile(r'(\w+)=(-?(?:\d+\.\d+|nan|inf))')


def _logged(lines):
    """``[(row label, [(name, text of the value)])]`` of the per-batch and per-epoch
    loss lines, in order."""
    rows = []
    for line in lines:
        batch, epoch = _BATCH.search(line), _EPOCH.search(line)
        if not (batch or epoch):
            continue
        label = batch.group(2) if batch else 'epoch %s' % epoch.group(1)
        rows.append((label, [(k, v) for k, v in _PAIR.findall(line) if k != 'LR']))
    return rows


def _grouped(values, size):
    """The recorded ``get()`` values, ``size`` per logged line."""
    return [values[i:i + size] for i in range(0, len(values), size)]


def _batch_diff(path_a, path_b):
    """``'image; targets'``: the largest absolute difference of the image field and of
    the other fields of two recorded batches."""
    import numpy as np

    with np.load(path_a) as a, np.load(path_b) as b:
        fields_a = [a['arr_%d' % i] for i in range(len(a.files))]
        fields_b = [b['arr_%d' % i] for i in range(len(b.files))]
    if [f.shape for f in fields_a] != [f.shape for f in fields_b]:
        return 'shapes differ'
    diffs = [float(np.abs(x.astype(np.float64) - y).max()) if x.size else 0.
             for x, y in zip(fields_a, fields_b)]
    return '%.1e; %.1e' % (diffs[0], max(diffs[1:]))


def _map(lines):
    found = [line for line in lines if line.startswith('mAP=')]
    return found[-1][4:] if found else '-'


def compare(unchanged, changed):
    """The table of two runs (from :func:`_run`) as text, and whether every logged value
    is equal."""
    rows_a, rows_b = _logged(unchanged[0]), _logged(changed[0])
    if not rows_a or [r[0] for r in rows_a] != [r[0] for r in rows_b]:
        raise RuntimeError('the runs logged different lines: %r vs %r'
                           % ([r[0] for r in rows_a], [r[0] for r in rows_b]))
    size = len(rows_a[0][1])
    groups_a, groups_b = _grouped(unchanged[1], size), _grouped(changed[1], size)
    table = [['iteration', 'unchanged', 'changed', 'equal', 'loss |diff|',
              'batch |diff| image; targets']]
    all_equal = True
    for index, ((label, pairs_a), (_, pairs_b)) in enumerate(zip(rows_a, rows_b)):
        equal = pairs_a == pairs_b
        all_equal &= equal
        diff = batch = '-'
        if index < len(groups_a) and index < len(groups_b):
            diff = '%.1e' % max(abs(a[1] - b[1]) for a, b in zip(groups_a[index],
                                                                groups_b[index]))
        if label.isdigit():
            batch = _batch_diff(unchanged[3][index], changed[3][index])
        table.append([label, ', '.join('%s=%s' % p for p in pairs_a),
                      ', '.join('%s=%s' % p for p in pairs_b), 'yes' if equal else 'NO', diff,
                      batch])
    table.append(['mAP (val)', _map(unchanged[0]), _map(changed[0]), '', '', ''])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    text = '\n'.join('  '.join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in table)
    return text, all_equal


def _script(text, edits, name, folder):
    """The path of a copy of the script ``text`` in ``folder``, with ``edits`` applied."""
    os.makedirs(folder)
    path = os.path.join(folder, name)
    with open(path, 'w') as handle:
        handle.write(text if edits is None else apply_edits(text, edits, name))
    return os.path.abspath(path)


def _digest(path):
    with open(path, 'rb') as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:16]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument('scripts', help="folder of gluoncv's train_ssd.py, train_yolo3.py, "
                                        "train_center_net.py")
    parser.add_argument('--cases', default=','.join(CASES),
                        help='comma-separated cases (default: all): %s' % ', '.join(CASES))
    parser.add_argument('--images', type=int, default=24,
                        help='training images (half VOC2007, half VOC2012)')
    parser.add_argument('--val-images', type=int, default=4, help='VOC2007 test images')
    parser.add_argument('--batch-size', type=int, default=4, help='images per batch')
    parser.add_argument('--script-args', default='',
                        help="more arguments for every run of the scripts, e.g. '--lr 0' "
                             "(weights stay fixed: the losses then compare the batches alone)")
    parser.add_argument('--keep', help='keep the runs (logs, changed scripts) in this folder')
    args = parser.parse_args(argv)
    cases = [case.strip() for case in args.cases.split(',') if case.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error('unknown cases %s; known: %s' % (unknown, ', '.join(CASES)))

    work = args.keep or tempfile.mkdtemp(prefix='script_losses_')
    if args.keep:
        shutil.rmtree(work, ignore_errors=True)
    home = os.path.join(work, 'home')
    half = args.images // 2
    write_voc(os.path.join(home, '.mxnet', 'datasets', 'voc'),
              {(2007, 'trainval'): half, (2012, 'trainval'): args.images - half,
               (2007, 'test'): args.val_images})
    print('dataset: %d synthetic VOC train images, %d test images, batch size %d, 1 epoch, '
          'CPU, --num-workers 0' % (args.images, args.val_images, args.batch_size))
    print('launcher: gluoncv.model_zoo.get_model with pretrained=False and '
          'pretrained_base=False, in both runs (no weights are downloaded)')
    baselines = {}
    all_equal = True
    try:
        for case in cases:
            script_name, extra, baseline, edits, title = CASES[case]
            source = os.path.join(args.scripts, script_name)
            with open(source) as handle:
                text = handle.read()
            run_args = (extra + _COMMON + ['--batch-size', str(args.batch_size)]
                        + shlex.split(args.script_args))
            key = (script_name, baseline, tuple(run_args))
            if key not in baselines:
                baselines[key] = _run(_script(text, EDITS.get(baseline), script_name,
                                              os.path.join(work, case, 'baseline')),
                                      run_args, home, os.path.join(work, case, 'unchanged'))
            unchanged = baselines[key]
            changed = _run(_script(text, EDITS[edits], script_name,
                                   os.path.join(work, case, 'changed')),
                           run_args, home, os.path.join(work, case, 'run'))
            table, equal = compare(unchanged, changed)
            all_equal &= equal
            print('\n== %s: %s' % (case, title))
            print('%s (sha256 %s), args: %s' % (script_name, _digest(source),
                                                ' '.join(a or "''" for a in run_args)))
            print('run time: unchanged %.0f s, changed %.0f s'
                  % (unchanged[2], changed[2]))
            print(table)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print('\nall logged losses equal: %s'
          % ('yes' if all_equal else 'NO'))
    return 0 if all_equal else 1


if __name__ == '__main__':
    if len(sys.argv) > 1 and sys.argv[1] == '_launch':
        _launch(sys.argv[2], sys.argv[3], sys.argv[5:])
    else:
        sys.exit(main())
