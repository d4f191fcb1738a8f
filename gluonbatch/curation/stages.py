"""Curation stages on MXNet Gluon, named after NeMo Curator's: an image embedder and a
classifier on the embeddings, each adding a column to a dataset's lazy metadata.

Calling a stage on an :class:`~gluonbatch.curation.ImageTextPairDataset` returns a copy
of the dataset with a new column computed per shard (``map_partitions``), the dataset
given left as it was: nothing runs until the metadata is computed (``save_metadata``,
``to_webdataset``, ``compute``), on whatever Dask scheduler is active. The model is loaded
once per process that computes a shard and runs one batch at a time there.

Examples
--------
>>> import tempfile
>>> import mxnet as mx
>>> from gluonbatch.curation import ImageTextPairDataset, make_example_dataset
>>> tmp = tempfile.TemporaryDirectory()
>>> ds = ImageTextPairDataset.from_webdataset(make_example_dataset(tmp.name), 'key')
>>> net = mx.gluon.nn.HybridSequential()
>>> net.add(mx.gluon.nn.Conv2D(4, 3, strides=4), mx.gluon.nn.GlobalAvgPool2D(),
...         mx.gluon.nn.Flatten())
>>> net.initialize(mx.init.Xavier())
>>> ds = GluonImageEmbedder(net, image_size=32, batch_size=2)(ds)
>>> head = mx.gluon.nn.Dense(1, in_units=4)
>>> head.initialize()
>>> ds = EmbeddingClassifier(head, pred_column='aesthetic_score')(ds)
>>> frame = ds.metadata.compute()
>>> frame['image_embedding'][0].shape, frame['aesthetic_score'].dtype
((4,), dtype('float32'))
>>> tmp.cleanup()
"""
import copy
import os
import threading
import uuid
import warnings
from collections.abc import Sequence
from typing import Any

import mxnet as mx
import numpy as np
import pandas as pd
from numpy.typing import DTypeLike

from .._core.checks import check_callable, check_int, check_str
from .._core.imagenet import IMAGENET_MEAN, IMAGENET_STD
from .._core.process import ProcessLocal
from .._core.typing import NDArray, PathLike
from ..batchify import Stack
from .image_text import ImageTextPairDataset

__all__ = ['ImageEmbedder', 'GluonImageEmbedder', 'ExportedImageEmbedder', 'ImageClassifier',
           'EmbeddingClassifier', 'ExportedEmbeddingClassifier']

# ImageNet statistics, which gluoncv's model-zoo backbones were trained with
_MEAN = np.array(IMAGENET_MEAN, dtype=np.float32) * 255
_STD = np.array(IMAGENET_STD, dtype=np.float32) * 255

# Dask computes shards in several threads, and a Gluon block (a hybridized one above all)
# is not safe to call from two threads at once; stages may share a block, so the lock is
# the process's, not the stage's
_MODEL_CALLS = ProcessLocal(threading.RLock)
# The models this process has loaded, by stage: each task may bring its own copy of a
# stage (a cluster unpickles one per task), which uses the model its first copy loaded.
_MODELS = ProcessLocal(dict)
_MODELS_KEPT = 4


class _ColumnTask:
    """The function a stage maps over the metadata's partitions: ``compute(frame)`` with a
    token of its own, as Dask cannot hash a network deterministically."""

    def __init__(self, compute, token):
        self.compute, self.token = compute, token

    def __call__(self, frame):
        return self.compute(frame)

    def __dask_tokenize__(self):
        return (type(self).__name__, self.token)


class _Stage:
    """What every stage shares: the model, loaded once per process and stage, run on one
    batch at a time per process."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = check_int(batch_size, 'batch_size', minimum=1)
        self._token = uuid.uuid4().hex

    def load_model(self, ctx: mx.Context) -> mx.gluon.Block:
        """The Gluon block to run on ``ctx`` (subclasses build or load it here)."""
        raise NotImplementedError('%s must define load_model(ctx)' % type(self).__name__)

    def _model(self):
        with _MODEL_CALLS.get():
            models = _MODELS.get()
            if self._token not in models:
                models[self._token] = self.load_model(mx.cpu())
                while len(models) > _MODELS_KEPT:
                    models.pop(next(iter(models)))  # the oldest
            return models[self._token]

    def run(self, batch: NDArray) -> np.ndarray:
        """The model's output on one batch, as a numpy array (loading the model first)."""
        with _MODEL_CALLS.get():
            return self._model()(batch).asnumpy()

    def _add_column(self, dataset, name, compute, meta):
        """A copy of ``dataset`` whose metadata has the column ``name``; ``dataset`` keeps
        its metadata."""
        task = _ColumnTask(compute, (self._token, dataset.path, name))
        out = copy.copy(dataset)
        out.metadata = dataset.metadata.assign(
            **{name: dataset.metadata.map_partitions(task, meta=(name, meta))})
        return out


class ImageEmbedder(_Stage):
    """Base class of image embedders: adds one embedding per record as a metadata column.

    A shard is embedded by reading its records through a DataLoader (``num_workers``
    threads decoding and resizing, gluonbatch's ``Stack`` batchifying)
    and running the model of :meth:`load_model` on each batch. Subclasses define
    :meth:`load_model`; :meth:`transform` is the preprocessing.

    Parameters
    ----------
    image_size : int, default 224
        Images are resized to ``image_size`` x ``image_size`` (bilinear).
    batch_size : int, default 64
    num_workers : int, default 0
        DataLoader worker threads per shard (threads: Dask runs each shard's task in a
        thread of its own, and a process forked beside other threads can deadlock).
    normalize_embeddings : bool, default True
        Divide each embedding by its L2 norm.
    embedding_column : str, default 'image_embedding'
    """

    def __init__(self, image_size: int = 224, batch_size: int = 64, num_workers: int = 0,
                 normalize_embeddings: bool = True,
                 embedding_column: str = 'image_embedding') -> None:
        super().__init__(batch_size)
        self.image_size = check_int(image_size, 'image_size', minimum=1)
        self.num_workers = check_int(num_workers, 'num_workers', minimum=0)
        self.normalize_embeddings = bool(normalize_embeddings)
        self.embedding_column = check_str(embedding_column, 'embedding_column')

    def transform(self, image: NDArray) -> np.ndarray:
        """One decoded (H, W, 3) uint8 image as the model's (3, S, S) float32 input:
        resized, then normalised with the ImageNet mean and standard deviation."""
        image = mx.image.imresize(image, self.image_size, self.image_size)
        array = (image.asnumpy().astype(np.float32) - _MEAN) / _STD
        return array.transpose(2, 0, 1)

    def embed_records(self, dataset: Any, indices: Sequence[int]) -> np.ndarray:
        """The (len(indices), D) float32 embeddings of records ``indices`` of ``dataset``
        (anything whose ``[i][0]`` is record ``i``'s image)."""
        images = mx.gluon.data.SimpleDataset(list(indices)).transform(
            lambda i: self.transform(dataset[i][0]), lazy=True)
        # Worker threads, not processes: Dask computes shards in threads of its own, and
        # forking beside them can copy a lock another thread holds into the child.
        loader = mx.gluon.data.DataLoader(images, batch_size=self.batch_size,
                                          batchify_fn=Stack(), num_workers=self.num_workers,
                                          thread_pool=True)
        parts = [self.run(batch.as_in_context(mx.cpu())) for batch in loader]
        if not parts:  # an empty shard
            return np.empty((0, 0), np.float32)
        embeddings = np.concatenate(parts).reshape(len(indices), -1).astype(np.float32)
        if self.normalize_embeddings:
            embeddings /= np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
        return embeddings

    def __call__(self, dataset: ImageTextPairDataset) -> ImageTextPairDataset:
        """A copy of ``dataset`` with :attr:`embedding_column` added to its metadata,
        lazily; ``dataset`` is left as it was."""
        records = dataset.reader  # what the tasks carry: the records, not the dataset

        def compute(frame):
            embeddings = self.embed_records(records, frame.index.tolist())
            return pd.Series(list(embeddings), index=frame.index, dtype=object)
        return self._add_column(dataset, self.embedding_column, compute, object)


class GluonImageEmbedder(ImageEmbedder):
    """An :class:`ImageEmbedder` running any Gluon block, e.g. a model-zoo backbone's
    ``features``; its output is flattened to one vector per image.

    Parameters
    ----------
    net : mxnet.gluon.Block
        Initialised (a deferred initialisation is completed with one blank image); it takes
        (N, 3, S, S) float32 batches. On a Dask cluster it is pickled to the workers, which
        a hybridized block cannot be: use :class:`ExportedImageEmbedder` for those.
    image_size, batch_size, num_workers, normalize_embeddings, embedding_column :
        As for :class:`ImageEmbedder`.
    """

    def __init__(self, net: mx.gluon.Block, image_size: int = 224, batch_size: int = 64,
                 num_workers: int = 0, normalize_embeddings: bool = True,
                 embedding_column: str = 'image_embedding') -> None:
        check_callable(net, 'net')
        super().__init__(image_size, batch_size, num_workers, normalize_embeddings,
                         embedding_column)
        # one blank image completes a deferred initialisation here: the shard tasks may run
        # on copies of the net (a Dask cluster's workers), which could not complete it
        net(mx.nd.zeros((1, 3, self.image_size, self.image_size)))
        self.net = net

    def load_model(self, ctx: mx.Context) -> mx.gluon.Block:
        return self.net


class ImageClassifier(_Stage):
    """Base class of classifiers on image embeddings: adds one prediction per record.

    Parameters
    ----------
    embedding_column : str
        The column of embeddings the model reads (an :class:`ImageEmbedder`'s).
    pred_column : str
        The column written.
    pred_type : type or numpy dtype, default float
        The predictions' dtype (``float`` becomes float32). The outputs are cast to it:
        with ``bool``, any non-zero output is True, so a filter on a score thresholds it
        in :meth:`postprocess`, as below.
    batch_size : int, default 4096

    Examples
    --------
    A filter that keeps the records whose score is above 0.5:

    >>> class Keep(ImageClassifier):
    ...     def __init__(self, head):
    ...         super().__init__('image_embedding', 'keep', pred_type=bool)
    ...         self.head = head
    ...     def load_model(self, ctx):
    ...         return self.head
    ...     def postprocess(self, outputs):
    ...         return super().postprocess(outputs) > 0.5
    >>> import tempfile
    >>> from gluonbatch.curation import ImageTextPairDataset, make_example_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> ds = ImageTextPairDataset.from_webdataset(make_example_dataset(tmp.name), 'key')
    >>> net = mx.gluon.nn.GlobalAvgPool2D()  # an image's mean colour, normalised
    >>> ds = GluonImageEmbedder(net, image_size=8)(ds)
    >>> head = mx.gluon.nn.Lambda(lambda x: x.max(axis=1))
    >>> ds = Keep(head)(ds)
    >>> frame = ds.metadata.compute()
    >>> frame['keep'].tolist() == [e.max() > 0.5 for e in frame['image_embedding']]
    True
    >>> tmp.cleanup()
    """

    def __init__(self, embedding_column: str, pred_column: str, pred_type: DTypeLike = float,
                 batch_size: int = 4096) -> None:
        super().__init__(batch_size)
        self.embedding_column = check_str(embedding_column, 'embedding_column')
        self.pred_column = check_str(pred_column, 'pred_column')
        self.pred_type = np.dtype(np.float32 if pred_type is float else pred_type)

    def postprocess(self, outputs: np.ndarray) -> np.ndarray:
        """The model's (N, ...) outputs as N predictions: a trailing axis of 1 dropped."""
        return outputs.reshape(len(outputs), -1)[:, 0] if outputs.ndim > 1 and \
            outputs.shape[1:] == (1,) else outputs

    def predict(self, embeddings: np.ndarray) -> np.ndarray:
        """The predictions for an (N, D) float32 array of embeddings."""
        parts = [self.postprocess(self.run(mx.nd.array(
                     embeddings[start:start + self.batch_size], dtype=np.float32)))
                 for start in range(0, len(embeddings), self.batch_size)]
        if not parts:
            return np.empty(0, self.pred_type)
        return np.concatenate(parts).astype(self.pred_type)

    def __call__(self, dataset: ImageTextPairDataset) -> ImageTextPairDataset:
        """A copy of ``dataset`` with :attr:`pred_column` added to its metadata, lazily;
        ``dataset`` is left as it was."""
        if self.embedding_column not in dataset.metadata.columns:
            raise ValueError('%s needs the column %r (run an ImageEmbedder first); the '
                             'metadata has %s' % (type(self).__name__, self.embedding_column,
                                                  list(map(str, dataset.metadata.columns))))

        def compute(frame):
            values = frame[self.embedding_column].tolist()
            embeddings = np.stack(values).astype(np.float32) if values else \
                np.empty((0, 0), np.float32)
            return pd.Series(self.predict(embeddings), index=frame.index)
        return self._add_column(dataset, self.pred_column, compute, self.pred_type)


class EmbeddingClassifier(ImageClassifier):
    """An :class:`ImageClassifier` running a Gluon block on the embeddings (the shape of
    NeMo Curator's aesthetic and NSFW scorers: a small head on image embeddings).

    Parameters
    ----------
    block : mxnet.gluon.Block
        Initialised with its shapes known (``in_units=D``, or run once): each shard is
        scored by a copy of it in the process that computes the shard. It takes (N, D)
        float32 embeddings.
    pred_column : str
    embedding_column : str, default 'image_embedding'
    pred_type, batch_size :
        As for :class:`ImageClassifier`.
    """

    def __init__(self, block: mx.gluon.Block, pred_column: str,
                 embedding_column: str = 'image_embedding', pred_type: DTypeLike = float,
                 batch_size: int = 4096) -> None:
        check_callable(block, 'block')
        super().__init__(embedding_column, pred_column, pred_type, batch_size)
        self.block = block

    def load_model(self, ctx: mx.Context) -> mx.gluon.Block:
        return self.block


def _import_block(prefix, epoch):
    """The block ``HybridBlock.export(prefix, epoch)`` saved; FileNotFoundError naming a
    missing file."""
    files = '%s-symbol.json' % prefix, '%s-%04d.params' % (prefix, epoch)
    for path in files:
        if not os.path.isfile(path):
            raise FileNotFoundError('no exported network at %s: %s is missing'
                                    % (prefix, path))
    with warnings.catch_warnings():
        # MXNet warns that the input's dtype is not given; it is float32, as exported
        warnings.simplefilter('ignore', UserWarning)
        return mx.gluon.SymbolBlock.imports(files[0], ['data'], files[1])


class _Exported:
    """A stage whose network ``HybridBlock.export(prefix, epoch)`` saved: each process that
    computes a shard loads it from the files (a hybridized network does not pickle, so this
    is the form a Dask cluster's workers can share)."""

    def _use_export(self, prefix, epoch):
        self.prefix, self.epoch = str(prefix), check_int(epoch, 'epoch', minimum=0)
        self._model()  # missing or broken files fail here, not in a task

    def load_model(self, ctx: mx.Context) -> mx.gluon.Block:
        return _import_block(self.prefix, self.epoch)


class ExportedImageEmbedder(_Exported, ImageEmbedder):
    """An :class:`ImageEmbedder` whose network was saved with ``HybridBlock.export(prefix)``;
    each process that computes a shard loads it from the files (a hybridized network does
    not pickle, so this is the form a Dask cluster's workers can share).

    Parameters
    ----------
    prefix : str
        ``prefix-symbol.json`` and ``prefix-%04d.params`` (of ``epoch``).
    epoch : int, default 0
    image_size, batch_size, num_workers, normalize_embeddings, embedding_column :
        As for :class:`ImageEmbedder`.

    Examples
    --------
    >>> import os, tempfile
    >>> from gluonbatch.curation import ImageTextPairDataset, make_example_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> net = mx.gluon.nn.HybridSequential()
    >>> net.add(mx.gluon.nn.Conv2D(4, 3, strides=4), mx.gluon.nn.GlobalAvgPool2D())
    >>> net.initialize()
    >>> net.hybridize()
    >>> _ = net(mx.nd.zeros((1, 3, 32, 32)))
    >>> net.export(os.path.join(tmp.name, 'backbone'))
    >>> ds = ImageTextPairDataset.from_webdataset(make_example_dataset(tmp.name), 'key')
    >>> embedded = ExportedImageEmbedder(os.path.join(tmp.name, 'backbone'), image_size=32)(ds)
    >>> embedded.metadata['image_embedding'].compute()[0].shape
    (4,)
    >>> tmp.cleanup()
    """

    def __init__(self, prefix: PathLike, epoch: int = 0, image_size: int = 224,
                 batch_size: int = 64, num_workers: int = 0, normalize_embeddings: bool = True,
                 embedding_column: str = 'image_embedding') -> None:
        super().__init__(image_size, batch_size, num_workers, normalize_embeddings,
                         embedding_column)
        self._use_export(prefix, epoch)


class ExportedEmbeddingClassifier(_Exported, ImageClassifier):
    """An :class:`ImageClassifier` whose head was saved with ``HybridBlock.export(prefix)``,
    loaded from the files by each process that computes a shard.

    Parameters
    ----------
    prefix : str
    pred_column : str
    epoch : int, default 0
    embedding_column, pred_type, batch_size :
        As for :class:`ImageClassifier`.
    """

    def __init__(self, prefix: PathLike, pred_column: str, epoch: int = 0,
                 embedding_column: str = 'image_embedding', pred_type: DTypeLike = float,
                 batch_size: int = 4096) -> None:
        super().__init__(embedding_column, pred_column, pred_type, batch_size)
        self._use_export(prefix, epoch)
