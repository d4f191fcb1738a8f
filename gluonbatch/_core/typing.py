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
import random
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Literal, TypeAlias

import mxnet as mx
import numpy as np

__all__ = ['PathLike', 'NDArray', 'BatchifyFn', 'LayoutKind', 'DeviceLayout', 'ChannelValues',
           'NumpyRandom', 'PythonRandom']

#: A file or directory: a ``str`` or an ``os.PathLike`` of one (``pathlib.Path``).
PathLike: TypeAlias = str | os.PathLike[str]
#: An MXNet array: ``mx.nd.NDArray``, or ``mx.np.ndarray`` in MXNet's numpy mode.
NDArray: TypeAlias = mx.nd.NDArray
#: Per-channel numbers (a normalization's mean or std): one for all channels, or one each.
ChannelValues: TypeAlias = float | Sequence[float]
#: Makes a batch of a list of samples.
BatchifyFn: TypeAlias = Callable[[list[Any]], Any]
#: How one field of a batch splits across devices (:mod:`gluonbatch._core.device_layout`).
LayoutKind: TypeAlias = Literal['rows', 'per_device', 'fields', 'whole']
#: A batch's device layout: a kind, a tuple or dict of layouts (field by field), or None
#: for a function that declares none.
DeviceLayout: TypeAlias = LayoutKind | tuple[Any, ...] | dict[Any, Any] | None
#: numpy's draws: a ``numpy.random.RandomState``, or the ``numpy.random`` module.
NumpyRandom: TypeAlias = np.random.RandomState | ModuleType
#: Python's draws: a ``random.Random``, or the ``random`` module.
PythonRandom: TypeAlias = random.Random | ModuleType
