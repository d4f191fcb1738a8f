"""The loops compiled at install, and what happens where they were not built.

Five C extensions are built by ``pip install`` (``setup.py``): the constrained crop's
trials (:mod:`gluonbatch.transforms.crop_trials`), three of OpenCV's resizes read from the
uint8 image and the crops of the others (:mod:`gluonbatch.transforms.canvas_resize`), the
colour pass into CHW planes (:func:`gluonbatch.transforms.pixels.affine_chw`) with the
channel sums of CenterNet's gray mean (:func:`gluonbatch.transforms.jitter.gray_mean`),
CenterNet's warp (:func:`gluonbatch.transforms.affine.warp_image`) and SSD's IoUs and
matching (:mod:`gluonbatch.targets.ssd`). Each repeats the arithmetic of its Python definition or
of the OpenCV call it stands for, so the results are the same either way. A source tree
used without being built (on ``PYTHONPATH``, say) has no extensions: :func:`load` then
warns once, naming the command that builds them, and the callers run their Python
definitions and OpenCV's calls, several times slower.

Examples
--------
>>> load('gluonbatch.transforms._trials').__name__
'gluonbatch.transforms._trials'
"""
import importlib
import warnings
from types import ModuleType

__all__ = ['NOT_BUILT_WARNING', 'load']

#: What :func:`load` warns (a ``RuntimeWarning``) the first time an extension is missing.
NOT_BUILT_WARNING = ('gluonbatch was not built: its compiled loops (the constrained crop\'s '
                     'trials, three resizes, the colour pass, CenterNet\'s warp, SSD\'s '
                     'matching) run as Python and OpenCV, the same results several times '
                     'slower. Install it with pip (pip install -e . in a source tree).')

_warned = False  # whether this process has warned NOT_BUILT_WARNING


def load(name: str) -> ModuleType | None:
    """The compiled module ``name``, or None (after a warning, once) if it was not built."""
    global _warned
    try:
        return importlib.import_module(name)
    except ImportError:
        if not _warned:
            _warned = True
            warnings.warn(NOT_BUILT_WARNING, RuntimeWarning, stacklevel=3)
        return None
