"""Detection datasets on shards: :class:`DetectionShards`, gluoncv's VOC and COCO items read
at random from tar shards."""
import os
from collections.abc import Callable, Sequence
from typing import Any

from .._core.checks import describe
from .._core.typing import PathLike
from ..shards.commit import reading
from ..shards.dataset import ShardDataset
from ..shards.decode import decode_image_of
from ..shards.files import Shard
from ..shards.parquet import open_parquet, read_table
from ..shards.reader import RecordReader
from ..shards.manifest import hinted
from .annotations import ID_COL, decode_annotations, read_manifest, record_fields

__all__ = ['DetectionShards']


class DetectionShards(ShardDataset):
    """A detection dataset converted to shards (by :func:`from_voc` or :func:`from_coco`),
    whose item ``i`` is the item ``i`` of the gluoncv dataset it was converted from.

    ``ds[i]`` is ``(image, label)``: the image decoded as gluoncv decodes the file (MXNet's
    OpenCV decoder, 3 channels, RGB; an ``mx.np.ndarray`` in numpy mode) and the label
    array gluoncv's ``VOCDetection`` or ``COCODetection`` gives for it (same rows, order
    and dtype). A dataset converted with ``segmentation=True`` gives ``(image, label,
    polygons)`` as ``COCOInstance`` does. So gluoncv's and gluonbatch's presets and
    batchifiers take it unchanged.

    Opening reads only the dataset's ``detection.json``; a shard's index and parquet are
    read when one of its records is first read, and each read is one ``pread`` of the
    record's bytes. Files are opened per process, so the dataset goes to DataLoader
    workers as it is.

    Parameters
    ----------
    path : str or os.PathLike
        The directory :func:`from_voc` or :func:`from_coco` wrote.
    transform : callable, optional
        As gluoncv's ``transform``: ``transform(image, label)`` (``transform(image, label,
        polygons)`` with polygons) is returned instead of the item.

    Raises
    ------
    FileNotFoundError
        No such directory, or no ``detection.json`` in it; when a record is read, a
        shard's file missing.
    ValueError
        A ``detection.json`` this version cannot read; when a record is read, a shard
        whose records disagree with it. Each error names the file and says to run
        ``gluonbatch wds verify``.

    Examples
    --------
    >>> import tempfile
    >>> from gluonbatch.detection import from_voc, make_voc_example
    >>> tmp = tempfile.TemporaryDirectory()
    >>> root = make_voc_example(tmp.name + '/voc', num_images=4)
    >>> path = from_voc(root, tmp.name + '/shards', splits=[(2007, 'trainval')], progress=False)
    >>> ds = DetectionShards(path)
    >>> image, label = ds[0]
    >>> image.shape[2], label.dtype, label.shape[1], ds.classes[:2]
    (3, dtype('float64'), 6, ('aeroplane', 'bicycle'))
    >>> ds.close(); tmp.cleanup()
    """

    def __init__(self, path: PathLike, transform: Callable[..., Any] | None = None) -> None:
        self.path = os.path.abspath(os.path.expanduser(os.fspath(path)))
        if transform is not None and not callable(transform):
            raise TypeError('transform must be callable or None, got %s' % describe(transform))
        self._transform = transform
        with reading(self.path):  # a conversion killed in its commit is settled first
            self._manifest = read_manifest(self.path)
            start, shards = 0, []
            for stem, count in self._manifest['shards']:
                shard = Shard(self.path, stem, os.path.exists(
                    os.path.join(self.path, stem + '.idx')))
                shard.start, shard.stop = start, start + count
                start = shard.stop
                shards.append(shard)
        # an epoch reads every record: a shard's table at once beats a lookup per read
        super().__init__(shards, RecordReader(shards, ID_COL, lookups=False))
        self._metadata: Any = None
        source = self._manifest['source']
        classes = self._manifest['classes']
        # as gluoncv spells them: VOC's classes a tuple, COCO's a list
        self._classes: Sequence[str] = tuple(classes) if source == 'voc' else list(classes)
        index_map = self._manifest.get('index_map')
        self.index_map = dict(index_map) if index_map else \
            {name: number for number, name in enumerate(classes)}
        category_ids = self._manifest.get('category_ids')
        if category_ids:
            self.json_id_to_contiguous = {json_id: number
                                          for number, json_id in enumerate(category_ids)}
            self.contiguous_id_to_json = dict(enumerate(category_ids))

    # ---------------------------------------------------------------- properties

    @property
    def classes(self) -> Sequence[str]:
        """The class names, in label order (a tuple for VOC, a list for COCO, as gluoncv)."""
        return self._classes

    @property
    def num_class(self) -> int:
        """The number of classes."""
        return len(self._classes)

    @property
    def source(self) -> str:
        """``'voc'`` or ``'coco'``: which gluoncv dataset the items equal."""
        return self._manifest['source']

    @property
    def segmentation(self) -> bool:
        """Whether items carry polygons: ``(image, label, polygons)``."""
        return self._manifest['segmentation']

    @property
    def options(self) -> dict[str, Any]:
        """The options the dataset was converted with (a copy)."""
        return dict(self._manifest['options'])

    @property
    def metadata(self) -> Any:  # a dask.dataframe.DataFrame: Dask is imported on demand
        """The shards' parquet rows as a lazy Dask DataFrame, one partition per shard,
        indexed by record number (only the first shard's schema is read here). It needs
        Dask and pandas, which reading the records does not."""
        if self._metadata is None:
            from ..curation.metadata import lazy_metadata  # curation's Dask, on demand

            first = next((shard for shard in self._shards if shard.stop > shard.start),
                         self._shards[0] if self._shards else None)
            if first is None:
                raise ValueError('%s holds no shards' % self.path)
            with open_parquet(first, ID_COL) as source:
                meta = source.schema_arrow.empty_table().to_pandas()
            self._metadata = lazy_metadata(self._shards, ID_COL, meta)
        return self._metadata

    def to_webdataset(self, path: PathLike, filter_column: str | None,
                      samples_per_shard: int = 10000, max_shards: int = 5,
                      old_id_col: str | None = None) -> list[str]:
        """Write the records whose ``filter_column`` of :attr:`metadata` is True as a new
        detection dataset: a curation step's output, to train on.

        The arguments, the new ids and the all-or-nothing commit are
        :meth:`.ImageTextPairDataset.to_webdataset`'s, which this is (that method, run on
        a detection directory, writes the same). The new ``detection.json`` is this one's
        (source, classes, class ids) with the new shards: ``DetectionShards(path)[j]`` is
        this dataset's item for the ``j``-th record kept. Needs Dask and pandas, as
        :attr:`metadata` does.

        Parameters
        ----------
        path : str or os.PathLike
            The new dataset's directory (made if missing; not this one, nor holding a
            dataset).
        filter_column : str or None
            A bool column of :attr:`metadata` (columns added in memory count): the
            parquet's ``num_objects``, ``classes``, ``difficult`` (VOC) or ``crowd``
            (COCO) make one; None keeps every record (a resharding).
        samples_per_shard : int, default 10000
        max_shards : int, default 5
            Digits of the shard number.
        old_id_col : str, optional
            Keep each record's previous key in this new column.

        Returns
        -------
        list of str
            The tar files written, in order; empty (nothing written) when no record is kept.

        Examples
        --------
        Keep the images with at least 3 objects:

        >>> import tempfile
        >>> from gluonbatch.detection import from_voc, make_voc_example
        >>> tmp = tempfile.TemporaryDirectory()
        >>> root = make_voc_example(tmp.name + '/voc', num_images=8)
        >>> ds = DetectionShards(from_voc(root, tmp.name + '/shards', progress=False))
        >>> ds.metadata['keep'] = ds.metadata['num_objects'] >= 3
        >>> kept = ds.to_webdataset(tmp.name + '/busy', 'keep')
        >>> busy = DetectionShards(tmp.name + '/busy')
        >>> wanted = [i for i, n in enumerate(ds.metadata['num_objects'].compute()) if n >= 3]
        >>> len(busy) == len(wanted), busy.classes == ds.classes
        (True, True)
        >>> all((busy[j][1] == ds[i][1]).all() for j, i in enumerate(wanted))
        True
        >>> busy.close(); ds.close(); tmp.cleanup()
        """
        from ..curation.metadata import checked_metadata  # curation's Dask, on demand
        from ..curation.reshard import reshard

        return reshard(checked_metadata(self.metadata, ID_COL, self._shards, self.path),
                       self._shards, self._reader, self.path, ID_COL, path, filter_column,
                       samples_per_shard, max_shards, old_id_col)

    def get_im_aspect_ratio(self) -> list[float]:
        """Width / height of each image, from the sizes its annotations give (the parquet
        files' ``width`` and ``height``), as gluoncv's ``COCODetection`` gives them; for
        aspect-ratio bucketing samplers."""
        ratios = []
        for shard in self._shards:
            sizes = read_table(shard, ID_COL, ['width', 'height']).to_pydict()
            ratios += [float(width) / height
                       for width, height in zip(sizes['width'], sizes['height'])]
        return ratios

    def __repr__(self):
        return '%s(%r, source=%r, shards=%d, records=%d%s)' % (
            type(self).__name__, self.path, self.source, len(self._shards), len(self),
            ', segmentation=True' if self.segmentation else '')

    # ---------------------------------------------------------------- reading

    def annotations(self, idx: int) -> dict[str, Any]:
        """Record ``idx``'s annotations: the dict its ``json`` member holds (the label, and
        the source's annotations of the image and its objects).

        Examples
        --------
        >>> import tempfile
        >>> from gluonbatch.detection import from_voc, make_voc_example
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     root = make_voc_example(tmp + '/voc', num_images=2, size=(64, 48))
        ...     ds = DetectionShards(from_voc(root, tmp + '/shards', progress=False))
        ...     record = ds.annotations(0)
        ...     members = sorted(ds.read_raw(0))
        ...     key = ds.record_id(0)
        ...     ds.close()
        >>> sorted(record)[:3], members, key
        (['image', 'label', 'label_dtype'], ['jpg', 'json', 'txt'], '00000000')
        """
        i = self._index(idx)
        return self._checked(i, decode_annotations, dict(self._reader.read_members(i)))

    def _checked(self, i, decode, members, *args):
        """``decode(members['json'], *args)`` for record ``i``: its ValueError names the
        member and says to run ``wds verify``, as does a record without annotations."""
        try:
            if 'json' not in members:
                raise ValueError('has no json member (annotations)')
            return decode(members['json'], *args)
        except ValueError as err:
            raise hinted(ValueError('%s %s' % (self._member(i, 'json'), err)),
                         self.path) from None

    def __getitem__(self, idx: int) -> Any:
        i = self._index(idx)
        members = dict(self._reader.read_members(i))
        segmentation = self._manifest['segmentation']
        label, polygons = self._checked(i, _decoded_fields, members, self.num_class,
                                        segmentation)
        item: tuple[Any, ...] = (self._image(members, i), label)
        if segmentation:
            item += (polygons,)
        return item if self._transform is None else self._transform(*item)

    def _member(self, i, ext):
        """Names member ``ext`` of record ``i`` (and its tar) in an error message."""
        return self._reader.describe(i, '%s.%s' % (self.record_id(i), ext))

    def _image(self, members, i):
        ext = next((ext for ext in members if ext not in ('json', 'txt')), None)
        if ext is None:
            raise ValueError('%s has no image member' % self._reader.describe(i))
        return decode_image_of(ext, members[ext], lambda: self._member(i, ext))

    def __getstate__(self):
        state = self.__dict__.copy()
        state['_metadata'] = None  # the lazy frame is made again where it is used
        return state


def _decoded_fields(data, num_class, segmentation):
    """``(label, polygons)`` of a record's ``json`` member ``data``, checked."""
    return record_fields(decode_annotations(data), num_class, segmentation)
