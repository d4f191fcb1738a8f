"""Cases 1-4 and 9: Pad and Stack, called directly, against gluoncv and the floor.

Each case function takes ``(rng, rounds, quick)`` and returns the case's row with its
checks. This module imports gluoncv: the runner imports it only to run a case.
"""
import gluoncv.data.batchify as gcv
import mxnet as mx
import numpy as np

from gluonbatch import batchify as gb
from gluonbatch.memory import use_memory

from .rows import percent_check, ratio_check, run_case

__all__ = ['case_pad_labels', 'case_pad_images', 'case_stack_numpy', 'case_stack_ndarray',
           'case_memory']


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


def _pad_images(rng, quick):
    """The images of cases 2 and 9: 8 float32 3x(500..600)x(800..1000), a tenth with quick.

    Returns the images and their title, ``'8 images 3x(500..600)x(800..1000) f32'``.
    """
    scale = 10 if quick else 1
    heights = rng.integers(500 // scale, 600 // scale + 1, size=8)
    widths = rng.integers(800 // scale, 1000 // scale + 1, size=8)
    images = [rng.random((3, int(h), int(w)), dtype=np.float32)
              for h, w in zip(heights, widths)]
    return images, '8 images 3x(%d..%d)x(%d..%d) f32' % (500 // scale, 600 // scale,
                                                         800 // scale, 1000 // scale)


def case_pad_images(rng, rounds, quick):
    """Case 2: Pad 8 float32 images 3x(500..600)x(800..1000) on axes (1, 2)."""
    samples, what = _pad_images(rng, quick)
    row = run_case('pad_images', 'Pad ' + what, gb.Pad(axis=(1, 2)), gcv.Pad(axis=(1, 2)),
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


def in_memory_mode(mode, fn, samples):
    """A no-argument call of ``fn(samples)`` under the memory setting ``mode``.

    The setting in force before each call is restored after it
    (:func:`gluonbatch.memory.use_memory`).

    >>> call = in_memory_mode('cpu', gb.Stack(), [[1, 2]])
    >>> call().context
    cpu(0)
    """
    def call():
        with use_memory(mode):
            return fn(samples)
    return call


def case_memory(rng, rounds, quick):
    """Case 9: Stack and Pad of image batches in the main process, memory 'shared' vs 'auto'.

    With ``'auto'`` the main process batches into ordinary memory, whose fresh pages cost
    less than fresh shared pages.
    """
    images, size = _stack_images(rng, quick)
    padded, _ = _pad_images(rng, quick)
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
