"""A dataset read under seeded generators: MXNet's own DataLoader, made reproducible."""
from typing import Any

import mxnet as mx
import numpy as np

from .keys import SampleKey, owned_generators, read_seeded

__all__ = ['SeededDataset']


class SeededDataset(mx.gluon.data.Dataset):
    """``dataset``, read by :class:`~gluonbatch.seeded.SampleKey`: each sample with
    Python's :mod:`random`, numpy's and MXNet's generators and the ``RandomState`` objects
    ``dataset`` holds (its transforms', found once) seeded from the key first.

    Pair it with a :class:`~gluonbatch.samplers.SeededBatchSampler` in
    ``mx.gluon.data.DataLoader`` and every batch is the same for any ``num_workers``, the
    thread pool included. Wrap the dataset with its transforms applied (``dataset =
    dataset.transform(...)`` first): a transform added outside runs after the lock that
    keeps threads from drawing from each other's generators. A plain index reads the
    sample unseeded.

    Parameters
    ----------
    dataset : mxnet.gluon.data.Dataset or sequence
        The dataset, transforms applied.

    Examples
    --------
    >>> import numpy as np, mxnet as mx
    >>> from gluonbatch.samplers import SeededBatchSampler
    >>> noisy = mx.gluon.data.SimpleDataset(list(range(6))).transform(
    ...     lambda x: x + np.random.uniform())
    >>> def epoch_of(num_workers):
    ...     loader = mx.gluon.data.DataLoader(
    ...         SeededDataset(noisy), num_workers=num_workers,
    ...         batch_sampler=SeededBatchSampler(len(noisy), 4, seed=5))
    ...     return [batch.asnumpy().tolist() for batch in loader]
    >>> epoch_of(0) == epoch_of(2)
    True
    """

    def __init__(self, dataset: Any) -> None:
        self._dataset = dataset
        self._owned: list[np.random.RandomState] | None = None  # found at the first read

    def __len__(self) -> int:
        return len(self._dataset)

    def __getitem__(self, key: SampleKey | int) -> Any:
        if not isinstance(key, SampleKey):
            return self._dataset[key]
        if self._owned is None:
            self._owned = owned_generators(self._dataset)
        return read_seeded(self._dataset, key, self._owned)

    def __repr__(self):
        return 'SeededDataset(%r)' % (self._dataset,)
