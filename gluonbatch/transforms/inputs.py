"""Deprecated alias of ``gluonbatch._core.inputs``: the checks of a sample's image and label,
which the presets, the targets and the batchify functions share.

Its names are the very objects of the new module; importing it warns.
"""
from .._core.deprecation import warn_moved
from .._core.inputs import as_numpy, channel_values, image_array, label_array

__all__ = ['as_numpy', 'image_array', 'label_array', 'channel_values']

warn_moved(__name__, 'gluonbatch._core.inputs')
