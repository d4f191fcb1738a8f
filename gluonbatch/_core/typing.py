"""The type aliases the public signatures share, one home for each.

MXNet ships no type information, so to mypy :data:`NDArray` is ``Any``; at run time it is
MXNet's class (``mx.np.ndarray`` is a subclass), which ``typing.get_type_hints`` and the
API pages show.

>>> import typing
>>> def save(path: PathLike, data: NDArray) -> None: ...
>>> typing.get_type_hints(save)['data'].__name__
'NDArray'
"""
import os
from typing import TypeAlias

import mxnet as mx

__all__ = ['PathLike', 'NDArray']

#: A file or directory: a ``str`` or an ``os.PathLike`` of one (``pathlib.Path``).
PathLike: TypeAlias = str | os.PathLike[str]
#: An MXNet array: ``mx.nd.NDArray``, or ``mx.np.ndarray`` in MXNet's numpy mode.
NDArray: TypeAlias = mx.nd.NDArray
