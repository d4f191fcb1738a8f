"""Output shapes of a traced network per input image size, inferred once and cached.

The R-CNN batchifiers and RPN targets need the feature-map sizes of ``net.features``
(:class:`FeatureShapes`) and the YOLOv3 batchifier the grids of the network's output layers, for every image size a batch has.
Both trace the network once into a symbol and infer its output shapes per distinct
``(height, width)`` from that symbol (a few milliseconds, no forward pass).

DataLoader pickles the batchify function with every batch. A :class:`SymbolShapes`
pickles as its symbol's JSON plus a token; every copy in a process (a forked worker's
inherited one included) shares one cache, found by that token, so the graph is parsed and
each size inferred once per process.

Examples
--------
>>> import mxnet as mx
>>> conv = mx.gluon.nn.Conv2D(8, 3, strides=2, padding=1)
>>> conv.initialize()
>>> shapes = SymbolShapes(conv(mx.sym.var('data')))
>>> shapes(64, 96), shapes(64, 96)
(((1, 8, 32, 48),), ((1, 8, 32, 48),))
>>> shapes.cache_info().hits, shapes.cache_info().misses
(1, 1)
"""
import functools
import uuid
from collections.abc import Sequence

import mxnet as mx

from .alloc import legacy_mode
from .checks import check_int, describe
from .process import shared_by_key

__all__ = ['SymbolShapes', 'FeatureShapes']


class SymbolShapes:
    """The shapes of every output of ``symbol`` for a ``(1, 3, height, width)`` input.

    Parameters
    ----------
    symbol : mxnet.symbol.Symbol or list of them
        A traced network with one input, ``data`` (a list is grouped).
    maxsize : int, default 1024
        Most image sizes remembered; training with random resizing sees a few hundred.
    what : str
        What the shapes are, for error messages.
    """

    def __init__(self, symbol: mx.sym.Symbol | Sequence[mx.sym.Symbol], maxsize: int = 1024,
                 what: str = 'the output shapes of the network') -> None:
        if isinstance(symbol, (list, tuple)):
            symbol = mx.sym.Group(list(symbol))
        if not isinstance(symbol, mx.sym.Symbol):
            raise TypeError('the traced network is %s, not a symbol' % describe(symbol))
        self._setup(lambda: symbol, check_int(maxsize, 'maxsize', minimum=1), what,
                    uuid.uuid4().hex)

    def _setup(self, make_symbol, maxsize, what, token):
        self._inference = shared_by_key(token, lambda: _Inference(make_symbol(), maxsize, what))
        self._token = token
        self.num_outputs = len(self._inference.symbol.list_outputs())

    def __reduce__(self):
        inference = self._inference
        return _restore, (self._token, inference.symbol_json(), inference.maxsize,
                          inference.what)

    def __call__(self, height: int, width: int) -> tuple[tuple[int, ...], ...]:
        """Tuple of the output shapes for an input of ``height`` x ``width``."""
        return self._inference.lookup(int(height), int(width))

    def cache_info(self) -> functools._CacheInfo:
        """Hits, misses, maxsize and current size of this process's cache (``functools``
        style); per process, so DataLoader workers count in their own
        (:meth:`FeatureShapes.cache_info` shows how to read them)."""
        return self._inference.lookup.cache_info()


class _Inference:
    """A symbol and its cache of inferred output shapes."""

    def __init__(self, symbol, maxsize, what):
        self.symbol = symbol
        self.maxsize = maxsize
        self.what = what
        self._json = None
        self.lookup = functools.lru_cache(maxsize=maxsize)(self._infer)

    def symbol_json(self):
        if self._json is None:
            self._json = self.symbol.tojson()
        return self._json

    def _infer(self, height, width):
        try:
            with legacy_mode():  # legacy shape rules, whatever the caller's mode
                _, out_shapes, _ = self.symbol.infer_shape(data=(1, 3, height, width))
        except mx.base.MXNetError as err:
            raise ValueError('cannot infer %s for an image of %dx%d: %s' % (
                self.what, height, width, str(err).strip()[:500])) from err
        if out_shapes is None:
            raise ValueError('cannot infer %s for an image of %dx%d: the graph has inputs '
                             'other than `data` whose shapes are unknown'
                             % (self.what, height, width))
        return tuple(tuple(int(d) for d in shape) for shape in out_shapes)


def _restore(token, symbol_json, maxsize, what):
    """Unpickle a SymbolShapes, sharing this process's cache for its token if it has one."""
    restored = SymbolShapes.__new__(SymbolShapes)
    restored._setup(lambda: mx.sym.load_json(symbol_json), maxsize, what, token)
    return restored


class FeatureShapes:
    """Feature-map sizes of every output of ``net.features`` for an input image size.

    The symbolic graph ``net.features(mx.sym.var('data'))`` is built once; its shapes are
    inferred once per distinct ``(height, width)`` for all outputs (levels) together and
    kept in a bounded LRU cache.

    Parameters
    ----------
    net : mxnet.gluon.HybridBlock
        A network with a ``features`` block (gluoncv's R-CNN networks have one).
    maxsize : int, default 1024
        Most image sizes remembered; training with random resizing sees a few hundred.

    Examples
    --------
    >>> import mxnet as mx
    >>> net = mx.gluon.nn.HybridSequential()
    >>> net.features = mx.gluon.nn.Conv2D(8, 3, strides=2, padding=1)
    >>> shapes = FeatureShapes(net)
    >>> shapes(64, 96), shapes(64, 96)
    (((32, 48),), ((32, 48),))
    >>> shapes.cache_info().hits, shapes.cache_info().misses
    (1, 1)
    """

    def __init__(self, net: mx.gluon.Block, maxsize: int = 1024) -> None:
        features = getattr(net, 'features', None)
        if not callable(features):
            raise ValueError('%s has no callable `features` block; R-CNN batchifiers need the '
                             'Faster/Mask R-CNN network whose feature maps the RPN targets '
                             'are laid out on' % type(net).__name__)
        try:
            with legacy_mode():  # gluoncv's R-CNN networks trace as legacy symbols only
                symbol = features(mx.sym.var(name='data'))
        except Exception as err:  # any failure here means the graph cannot be traced
            raise ValueError('net.features of %s cannot be traced symbolically (%s: %s); '
                             'it must be a HybridBlock' % (type(net).__name__,
                                                           type(err).__name__, err)) from err
        self._shapes = SymbolShapes(symbol, maxsize, 'the feature-map shapes of net.features')
        self.num_levels = self._shapes.num_outputs

    def __call__(self, height: int, width: int) -> tuple[tuple[int, int], ...]:
        """Tuple of ``(feature_height, feature_width)``, one per level, for an input size."""
        shapes = self._shapes(height, width)
        if any(len(shape) != 4 for shape in shapes):
            raise ValueError('net.features does not give 4-d (N, C, H, W) feature maps for an '
                             'image of %dx%d (got %s)' % (height, width, list(shapes)))
        return tuple((shape[2], shape[3]) for shape in shapes)

    def cache_info(self) -> functools._CacheInfo:
        """Hits, misses, maxsize and current size of this process's cache (``functools``
        style).

        The counts are per process. With DataLoader worker processes (``num_workers > 0``)
        the workers batchify, each with its own cache, so in the main process the counts
        stay at zero. A worker's counts are read in the worker: for instance a batchify
        function (a module-level one, which DataLoader can pickle) that calls the
        batchifier and then logs ``batchifier.feature_shapes.cache_info()``; or load with
        ``num_workers=0`` to count in the main process.

        Examples
        --------
        A forked process, as a DataLoader worker is, counts in its own cache:

        >>> import multiprocessing
        >>> import mxnet as mx
        >>> net = mx.gluon.nn.HybridSequential()
        >>> net.features = mx.gluon.nn.Conv2D(8, 3, strides=2, padding=1)
        >>> shapes = FeatureShapes(net)
        >>> fork = multiprocessing.get_context('fork')
        >>> counts = fork.SimpleQueue()
        >>> def work():  # in the forked process
        ...     shapes(64, 96), shapes(64, 96)
        ...     counts.put(shapes.cache_info()[:2])
        >>> worker = fork.Process(target=work)
        >>> worker.start(); counts.get()  # the worker's hits and misses
        (1, 1)
        >>> worker.join(); shapes.cache_info()[:2]  # the main process's
        (0, 0)
        """
        return self._shapes.cache_info()
