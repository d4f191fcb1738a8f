"""The anchors the RPN targets are made for: taken from a gluoncv R-CNN network once, laid out
per image size.

gluoncv's R-CNN train presets run the network's anchor generators once, in their
constructor, on a zero image of ``ashape x ashape``, and per sample cut the resulting grids
to the feature-map sizes of the image and ignore the anchors that cross its border.
:class:`RPNAnchors` does the constructor's part; :class:`AnchorLayout` is the per-size part,
computed once per image size (training sees the same sizes again and again) and kept in an
LRU cache. :class:`gluonbatch.targets.rpn.RPNTargetGenerator` labels the anchors
of a layout.

Examples
--------
>>> import numpy as np
>>> grid = np.array([[[0, 0, 7, 7, -2, -2, 9, 9]]], np.float32)   # one position, 2 anchors
>>> layout = AnchorLayout((10, 10), [grid])
>>> layout.levels, layout.num_anchors, layout.inside.tolist()
(((1, 1, 2),), 2, [0])
"""
import collections
import copy
import threading
from collections.abc import Sequence

import mxnet as mx
import numpy as np
from numpy.typing import ArrayLike

from .._core.alloc import legacy_mode
from .._core.shape_inference import FeatureShapes
from .iou import AnchorSet

__all__ = ['AnchorLayout', 'RPNAnchors']


class AnchorLayout:
    """The anchors of one image size, as gluoncv lays them out for the RPN targets.

    Parameters
    ----------
    size : (int, int)
        The image ``(height, width)``.
    grids : sequence of numpy.ndarray
        Per feature level, the ``(height, width, 4 * anchors per position)`` float32 anchor
        grid, already cut to the level's feature-map size.

    Attributes
    ----------
    size : (int, int)
        The image ``(height, width)``.
    levels : tuple of (int, int, int)
        Per feature level ``(height, width, anchors per position)`` of the targets: the
        feature map's size, cut to the size of the pre-generated anchor grid where that is
        smaller (gluoncv slices the grid with the feature map's size).
    num_anchors : int
        Anchors over all levels, in gluoncv's order: level, row, column, anchor.
    inside : numpy.ndarray
        Indices of the anchors inside the image (gluoncv ignores the others: an anchor
        with ``xmin < 0``, ``ymin < 0``, ``xmax >= width`` or ``ymax >= height``), ascending.
    inside_corners : numpy.ndarray
        Their corners by coordinate, ``(4, len(inside))`` float32 (``xmin`` row first).

    Examples
    --------
    >>> grid = np.array([[[0, 0, 4, 4, 1, 1, 5, 5]]], np.float32)
    >>> layout = AnchorLayout((8, 8), [grid])
    >>> layout.ious(np.array([[0, 0, 4, 4]], np.float32))
    array([[1.        , 0.39130434]], dtype=float32)
    """

    __slots__ = ('size', 'levels', 'num_anchors', 'inside', '_grids', '_starts',
                 '_inside_set')

    def __init__(self, size: tuple[int, int], grids: Sequence[np.ndarray]) -> None:
        height, width = size
        self.size = (int(height), int(width))
        self._grids = tuple(grids)
        self.levels = tuple((grid.shape[0], grid.shape[1], grid.shape[2] // 4)
                            for grid in self._grids)
        counts = [h * w * depth for h, w, depth in self.levels]
        self._starts = np.cumsum([0] + counts)
        self.num_anchors = int(self._starts[-1])
        anchors = self.anchors()
        crosses = anchors[:, 0] < 0
        crosses |= anchors[:, 1] < 0
        crosses |= anchors[:, 2] >= width
        crosses |= anchors[:, 3] >= height
        self.inside = np.flatnonzero(~crosses).astype(np.int32)
        # only the anchors inside the image ever need an IoU
        self._inside_set = AnchorSet(anchors[self.inside])

    @property
    def inside_corners(self) -> np.ndarray:
        """Corners of the anchors inside the image, ``(4, len(inside))`` float32."""
        return self._inside_set.rows

    def anchors(self, indices: ArrayLike | None = None) -> np.ndarray:
        """Corners of all anchors ``(num_anchors, 4)``, or of those at ``indices``; float32."""
        if indices is None:
            if not self._grids:
                return np.zeros((0, 4), np.float32)
            return np.concatenate([grid.reshape(-1, 4) for grid in self._grids])
        indices = np.asarray(indices, dtype=np.intp)
        out = np.empty((len(indices), 4), np.float32)
        level_of = np.searchsorted(self._starts, indices, side='right') - 1
        for level, (grid, (_, width, depth)) in enumerate(zip(self._grids, self.levels)):
            picked = np.flatnonzero(level_of == level)
            if len(picked):
                local = indices[picked] - self._starts[level]
                row, rest = np.divmod(local, width * depth)
                column, anchor = np.divmod(rest, depth)
                out[picked] = grid.reshape(grid.shape[0], width, depth, 4)[row, column, anchor]
        return out

    def split(self, *targets: np.ndarray) -> tuple[list[np.ndarray], ...]:
        """Each flat per-anchor target ``(num_anchors, ...)`` as a list with one
        ``(height, width, -1)`` view per level, as gluoncv returns them."""
        out = []
        for target in targets:
            out.append([target[start:stop].reshape(height, width, -1)
                        for start, stop, (height, width, _) in
                        zip(self._starts[:-1], self._starts[1:], self.levels)])
        return tuple(out)

    @property
    def nbytes(self) -> int:
        """Memory of what the layout holds for the image size (the grids are shared)."""
        return self.inside.nbytes + self._inside_set.nbytes

    def ious(self, boxes: np.ndarray) -> np.ndarray:
        """MXNet's float32 IoU of ``boxes`` ``(M, 4)`` with the inside anchors, laid out
        ``(M, len(inside))`` (box by anchor, the transpose of MXNet's)."""
        return self._inside_set.iou(boxes)


class RPNAnchors:
    """The RPN anchors of a gluoncv R-CNN network, laid out per image size.

    At construction the anchors are taken from ``net.rpn.anchor_generator`` exactly as
    gluoncv's train presets take them: each generator is run on a zero image of
    ``ashape x ashape`` (halved per level with ``multi_stage``, never below 16) and its
    output kept as an ``(ashape, ashape, 4 * anchors)`` grid. The network is not touched (a
    copy of the generators is moved to the CPU). Per image size, the feature-map sizes of
    ``net.features`` cut the grids (``FeatureShapes``, inferred once per size) and the anchors inside the image are found; layouts are kept in an LRU
    cache of at most ``cache_bytes``, as training sees the same sizes again and again (a C4
    layout of a 600x1000 image takes about 0.5 MB, an FPN one of 800x1333 about 6 MB).

    Parameters
    ----------
    net : mxnet.gluon.Block
        A gluoncv Faster/Mask R-CNN network (``net.rpn.anchor_generator``, ``net.features``);
        its anchor parameters must be initialized (``net.initialize()``, or
        ``net.rpn.anchor_generator.initialize()`` alone).
    ashape : int, default 128
        Size of the pre-generated anchor grid (gluoncv's ``ashape``; its train scripts pass
        ``net.ashape``).
    multi_stage : bool, default False
        One generator per feature level (FPN networks).
    cache_bytes : int, default 64 MiB
        Most memory the cached layouts take; the most recent one is always kept.
    """

    def __init__(self, net: mx.gluon.Block, ashape: int = 128, multi_stage: bool = False,
                 cache_bytes: int = 64 << 20) -> None:
        with legacy_mode():
            generator = copy.deepcopy(net.rpn.anchor_generator)
            generator.collect_params().reset_ctx(mx.cpu())
            generators = list(generator) if multi_stage else [generator]
            grids = []
            for level in generators:
                anchors = level(mx.nd.zeros((1, 3, ashape, ashape)))
                anchors = anchors.reshape((1, 1, ashape, ashape, -1)).asnumpy()
                grids.append(np.ascontiguousarray(anchors[0, 0], dtype=np.float32))
                if multi_stage:
                    ashape = max(ashape // 2, 16)
        self.grids = tuple(grids)
        self.multi_stage = bool(multi_stage)
        self.feature_shapes = FeatureShapes(net)
        self.cache_bytes = int(cache_bytes)
        self._init_cache()

    def _init_cache(self):
        self._cache = collections.OrderedDict()
        self._cached_bytes = 0
        self._lock = threading.Lock()

    def __getstate__(self):
        state = self.__dict__.copy()
        del state['_cache'], state['_cached_bytes'], state['_lock']
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_cache()

    def layout(self, height: int, width: int) -> AnchorLayout:
        """The :class:`AnchorLayout` of an image of ``height x width`` (cached)."""
        key = (int(height), int(width))
        with self._lock:
            layout = self._cache.get(key)
            if layout is not None:
                self._cache.move_to_end(key)
                return layout
        shapes = self.feature_shapes(*key)
        if not self.multi_stage:
            shapes = shapes[:1]
        layout = AnchorLayout(key, [grid[:fh, :fw] for grid, (fh, fw) in
                                    zip(self.grids, shapes)])
        with self._lock:
            if key not in self._cache:
                self._cache[key] = layout
                self._cached_bytes += layout.nbytes
            while self._cached_bytes > self.cache_bytes and len(self._cache) > 1:
                self._cached_bytes -= self._cache.popitem(last=False)[1].nbytes
        return layout
