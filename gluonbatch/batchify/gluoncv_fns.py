"""gluoncv's two batchify functions for special layouts: ``ms_batchify_fn`` (several
image sizes) and ``dict_batchify_fn`` (dicts of NDArrays)."""
from collections.abc import Sequence
from typing import Any

import mxnet as mx

from .._core.checks import check_batch, check_fields, described
from .arrays import Append, Stack
from .fields import Dict

__all__ = ['ms_batchify_fn', 'dict_batchify_fn']


def ms_batchify_fn(data: Sequence[Any]) -> list[Any]:
    """Multi-size batchify: NDArrays and strings as lists (not stacks), tuples per field.

    For evaluation at several image sizes (gluoncv's segmentation ``ms_batchify_fn``).
    NDArrays come back as fresh ``cpu_shared`` copies with their dtype; a tuple sample gives
    a list with one such list per field.

    >>> import mxnet as mx
    >>> batch = ms_batchify_fn([(mx.nd.ones((3, 4)), 'a'), (mx.nd.ones((3, 6)), 'b')])
    >>> [a.shape for a in batch[0]], batch[1]
    ([(3, 4), (3, 6)], ['a', 'b'])
    """
    check_batch(data)
    first = data[0]
    if isinstance(first, str):
        return list(data)
    if isinstance(first, mx.nd.NDArray):
        return _APPEND_AS_IS(data)
    if isinstance(first, tuple):
        check_fields(data, len(first), 'ms_batchify_fn (like sample 0)')
        return [ms_batchify_fn(list(field)) for field in zip(*data)]
    raise TypeError('ms_batchify_fn takes NDArrays, strings or tuples of them; sample 0 is '
                    '%s' % described(first))


def dict_batchify_fn(data: Sequence[Any]) -> Any:
    """Stack NDArrays, recursing into dicts: a dict of stacked batches (dtype kept).

    >>> import mxnet as mx
    >>> batch = dict_batchify_fn([{'depth': mx.nd.ones((2, 2)), 'meta': {'k': mx.nd.ones(1)}},
    ...                           {'depth': mx.nd.zeros((2, 2)), 'meta': {'k': mx.nd.ones(1)}}])
    >>> batch['depth'].shape, batch['meta']['k'].shape
    ((2, 2, 2), (2, 1))
    """
    check_batch(data)
    first = data[0]
    if isinstance(first, mx.nd.NDArray):
        return _STACK_AS_IS(data)
    if isinstance(first, dict):
        return Dict({key: dict_batchify_fn for key in first})(data)
    raise TypeError('dict_batchify_fn takes NDArrays or dicts of them; sample 0 is %s'
                    % described(first))


_APPEND_AS_IS = Append(expand=False)
_STACK_AS_IS = Stack()
