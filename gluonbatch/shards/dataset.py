"""What every dataset read from shards has: :class:`ShardDataset`, the records of a list of
shards behind a :class:`~gluonbatch.shards.reader.RecordReader`."""
import abc
from collections.abc import Iterable
from typing import Any, Self

import mxnet as mx

from .._core.checks import check_index
from .files import Shard
from .reader import RecordReader

__all__ = ['ShardDataset']


class ShardDataset(mx.gluon.data.Dataset, metaclass=abc.ABCMeta):
    """A gluon ``Dataset`` of the records of some shards: their files, lengths, ids and raw
    bytes, and the files' lifetime.

    A subclass provides two things: the shards and their reader, given to this class's
    constructor once the shards' records are counted, and ``__getitem__``, which decodes a
    record (:meth:`read_raw` gives its bytes). :class:`~gluonbatch.curation.ImageTextPairDataset`
    and :class:`~gluonbatch.detection.DetectionShards` are two.

    Parameters
    ----------
    shards : list of Shard
        The dataset's :class:`~gluonbatch.shards.files.Shard` objects, in order, each with
        ``start`` and ``stop`` (its records' numbers in the dataset) set.
    reader : RecordReader
        The :class:`~gluonbatch.shards.reader.RecordReader` of those shards.
    """

    def __init__(self, shards: Iterable[Shard], reader: RecordReader) -> None:
        self._shards, self._reader = list(shards), reader

    @abc.abstractmethod
    def __getitem__(self, idx: int) -> Any:
        """Record ``idx``, decoded."""

    @property
    def tar_files(self) -> list[str]:
        """The tar path of every shard of this dataset, in shard order."""
        return [shard.tar for shard in self._shards]

    @property
    def reader(self) -> RecordReader:
        """The :class:`~gluonbatch.shards.reader.RecordReader` behind ``ds[i]``: the
        same records without the metadata, light to send to Dask workers."""
        return self._reader

    def __len__(self) -> int:
        return len(self._reader)

    @property
    def shard_lengths(self) -> tuple[int, ...]:
        """The records of every shard of this dataset, in shard order: a tuple of ints, for
        :class:`~gluonbatch.samplers.ShardWindowSampler`.

        Examples
        --------
        >>> import tempfile
        >>> from gluonbatch.curation import ImageTextPairDataset, make_example_dataset
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     ds = ImageTextPairDataset.from_webdataset(
        ...         make_example_dataset(tmp, num_shards=2, samples_per_shard=3), 'key')
        ...     print(ds.shard_lengths)
        (3, 3)
        """
        return tuple(shard.stop - shard.start for shard in self._reader.shards)

    def close(self) -> None:
        """Close this process's tar files. The dataset stays usable: a later read opens
        the files it needs again.

        Reading opens each shard's tar on first use and keeps it open (one descriptor per
        shard and process). ``close`` gives them back now; without it they are closed
        when the dataset (and every copy of it) is garbage-collected, or when the
        interpreter exits, without a ``ResourceWarning``. The files are shared with the
        dataset's copies (a curation stage returns one): closing one closes them for all,
        so close when none of them is reading (in another thread, say). A DataLoader worker
        process opens and closes its own. ``with`` closes them at the end of the block.

        Examples
        --------
        >>> import tempfile
        >>> from gluonbatch.curation import ImageTextPairDataset, make_example_dataset
        >>> tmp = tempfile.TemporaryDirectory()
        >>> path = make_example_dataset(tmp.name, num_shards=2)
        >>> with ImageTextPairDataset.from_webdataset(path, 'key') as ds:
        ...     caption = ds[0][1]
        ...     print(len(ds.reader.open_files()))
        1
        >>> ds.reader.open_files()  # closed at the end of the block
        []
        >>> ds[0][1] == caption  # reading again opens the file again
        True
        >>> ds.close()
        >>> tmp.cleanup()
        """
        self._reader.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def record_id(self, idx: int) -> str:
        """The id of record ``idx``, found as a read finds it, without reading its bytes.

        Examples
        --------
        >>> import tempfile
        >>> from gluonbatch.curation import ImageTextPairDataset, make_example_dataset
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     ds = ImageTextPairDataset.from_webdataset(
        ...         make_example_dataset(tmp, num_shards=2, samples_per_shard=2), 'key')
        ...     print(ds.record_id(-1))
        000011
        """
        _, records, row = self._reader.locate(self._index(idx))
        return str(records.ids[row])

    def read_raw(self, idx: int) -> dict[str, bytes]:
        """The undecoded members of record ``idx`` as ``{extension: bytes}``.

        Examples
        --------
        >>> import tempfile
        >>> from gluonbatch.curation import ImageTextPairDataset, make_example_dataset
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     ds = ImageTextPairDataset.from_webdataset(
        ...         make_example_dataset(tmp, num_shards=1), 'key')
        ...     print(ds.read_raw(0)['jpg'][:2])
        b'\\xff\\xd8'
        """
        return dict(self._reader.read_members(self._index(idx)))

    def _index(self, idx):
        return check_index(idx, len(self))
