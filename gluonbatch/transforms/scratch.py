"""Deprecated alias of ``gluonbatch._core.scratch``: the per-thread scratch arrays, which
the presets and the batchify functions share.

Its names are the very objects of the new module; importing it warns.
"""
from .._core.deprecation import warn_moved
from .._core.scratch import MAX_BUFFERS, MAX_BYTES, empty, zeros

__all__ = ['MAX_BYTES', 'MAX_BUFFERS', 'empty', 'zeros']

warn_moved(__name__, 'gluonbatch._core.scratch')
