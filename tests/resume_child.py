"""A training loop that saves where it is after every batch and resumes from there: the
process the resume tests (``test_seeded_resume.py``) kill with SIGKILL.

``python tests/resume_child.py LOG NUM_WORKERS STEPS`` consumes batches of a seeded
:class:`~gluonbatch.dataloader.DetectionDataLoader` (small synthetic detection samples
under SSD's train augmentation, ``last_batch='rollover'``, several epochs) until ``LOG``
holds ``STEPS`` lines. After each batch it appends one line, ``<sha256 of the batch>
<loader.state_dict() as JSON>``, flushes and fsyncs it, and then prints ``step N`` (``N``:
the lines ``LOG`` holds). It resumes from the state on the last complete line of ``LOG``;
an incomplete last line (a write cut short by the kill) is cut off first.
"""
import hashlib
import json
import os
import sys
import warnings

import mxnet as mx
import numpy as np

from gluonbatch.dataloader import DetectionDataLoader
from gluonbatch.transforms.presets.ssd import SSDDefaultTrainTransform

__all__ = ['SEED', 'SAMPLES', 'BATCH_SIZE', 'samples', 'augmentation', 'dataset',
           'make_loader', 'batch_digest', 'logged', 'train']

SEED = 20240611
#: Samples, batch size: an epoch of 3 1/3 batches, so the rolled-over batches of later
#: epochs start at every offset.
SAMPLES, BATCH_SIZE = 10, 3


def samples():
    """Synthetic detection samples: a 24x32 uint8 image and 1-3 boxes each."""
    rng = np.random.RandomState(0)
    made = []
    for _ in range(SAMPLES):
        image = rng.randint(0, 256, (24, 32, 3)).astype(np.uint8)
        corners = rng.randint(0, 10, (rng.randint(1, 4), 2))
        boxes = np.hstack([corners, corners + 10, rng.randint(0, 20, (len(corners), 1)),
                           np.zeros((len(corners), 1))]).astype(np.float32)
        made.append((image, boxes))
    return mx.gluon.data.SimpleDataset(made)


def augmentation(size=16):
    """SSD's train augmentation to ``size`` x ``size``: it draws from Python's and
    numpy's generators."""
    return SSDDefaultTrainTransform(size, size)


def dataset():
    """:func:`samples` under :func:`augmentation`."""
    return samples().transform(augmentation())


def make_loader(num_workers):
    """The seeded loader of the training loop."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # DetectionDataLoader is deprecated (as in gluoncv)
        return DetectionDataLoader(dataset(), batch_size=BATCH_SIZE, shuffle=True,
                                   last_batch='rollover', num_workers=num_workers, seed=SEED)


def batch_digest(batch):
    """SHA-256 of a batch's arrays: their shapes, dtypes and bytes."""
    digest = hashlib.sha256()
    for array in batch:
        array = array.asnumpy()
        digest.update(repr((array.shape, array.dtype.str)).encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _complete_part(path):
    """The bytes of ``path`` up to its last newline (all of it when it ends with one)."""
    if not os.path.exists(path):
        return b''
    with open(path, 'rb') as handle:
        content = handle.read()
    return content[:content.rfind(b'\n') + 1]


def logged(path):
    """``(digest, state)`` of every complete line of the log at ``path``."""
    lines = _complete_part(path).decode().splitlines()
    return [(digest, json.loads(state)) for digest, state in
            (line.split(' ', 1) for line in lines)]


def train(path, num_workers, steps, out):
    """Consume batches until the log at ``path`` holds ``steps`` lines, resuming from its
    last complete line; print ``step N`` to ``out`` after each line is on disk."""
    complete = _complete_part(path)
    with open(path, 'ab') as log:
        log.truncate(len(complete))  # a line cut short is no batch consumed
        done = logged(path)
        loader = make_loader(num_workers)
        if done:
            loader.load_state_dict(done[-1][1])
        count = len(done)
        while count < steps:
            for batch in loader:
                line = '%s %s\n' % (batch_digest(batch), json.dumps(loader.state_dict()))
                log.write(line.encode())
                log.flush()
                os.fsync(log.fileno())
                count += 1
                print('step %d' % count, file=out, flush=True)
                if count == steps:
                    break


if __name__ == '__main__':
    train(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.stdout)
