"""CenterNet loaders the way gluoncv's ``train_center_net.py`` builds them, on gluonbatch presets.

Train batches are six ``Stack()``: the image and the five dense targets gluonbatch's
``CenterNetDefaultTrainTransform`` draws on the network's output grid (class heatmaps,
box sizes and centre offsets at each object's centre, and their masks); validation batches
are ``Tuple(Stack(), Pad(pad_val=-1))`` of images and padded labels. ``--train-steps K``
runs K iterations of the heatmap focal loss and the masked L1 losses of box size and
centre offset, backward and an SGD step.
"""
import argparse
import sys
import types
import warnings
from collections.abc import Sequence
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from .._core.typing import BatchifyFn, NDArray
from .runner import (detection_dataset, detector_loaders, loader_parser, run_example,
                     train_order)

__all__ = ['TRAIN_FIELDS', 'VAL_FIELDS', 'DEFAULT_NETWORK', 'gluoncv_batchify', 'target_boxes',
           'build', 'train_steps', 'main']

#: The names of a train batch's fields, in order.
TRAIN_FIELDS = ('image', 'heatmap_targets', 'wh_targets', 'wh_masks', 'center_reg_targets',
                'center_reg_masks')
#: The names of a validation batch's fields, in order.
VAL_FIELDS = ('image', 'label')
#: The smallest CenterNet of gluoncv's model zoo.
DEFAULT_NETWORK = 'center_net_mobilenetv3_small_duc_voc'

# gluoncv's train_center_net.py defaults: loss weights and SGD settings
WH_WEIGHT, CENTER_REG_WEIGHT = 0.1, 1.0
SGD = {'learning_rate': 1.25e-4, 'wd': 1e-4, 'momentum': 0.9}


def gluoncv_batchify(module: types.ModuleType) -> BatchifyFn:
    """train_center_net.py's batchify, built from ``module`` (gluoncv's batchify module)."""
    return module.Tuple([module.Stack() for _ in TRAIN_FIELDS])


def target_boxes(heatmaps: np.ndarray, wh_targets: np.ndarray, wh_masks: np.ndarray,
                 center_reg_targets: np.ndarray, scale: float) -> list[np.ndarray]:
    """The boxes a CenterNet train batch encodes, per sample, in input-image pixels.

    Every object has a 1 in its class's heatmap, its width and height in ``wh_targets`` and
    the fraction its centre lies past that cell in ``center_reg_targets``, at the cell of its
    centre on the output grid (``scale`` times coarser than the image).

    Parameters
    ----------
    heatmaps : numpy.ndarray
        (N, C, h, w) class heatmaps.
    wh_targets, wh_masks, center_reg_targets : numpy.ndarray
        (N, 2, h, w) each: box sizes, where they count, centre offsets.
    scale : float
        Input-image pixels per output cell (the network's ``scale``).

    Returns
    -------
    list of numpy.ndarray
        Per sample, (M, 5) rows ``xmin, ymin, xmax, ymax, class``.

    Examples
    --------
    >>> heatmaps, targets = np.zeros((1, 3, 8, 8)), np.zeros((3, 1, 2, 8, 8))
    >>> heatmaps[0, 2, 5, 1] = 1                          # class 2 centred in cell (x=1, y=5)
    >>> targets[:, 0, :, 5, 1] = [[3, 2], [1, 1], [0.5, 0.25]]  # w, h; masks; offsets
    >>> target_boxes(heatmaps, *targets, scale=4)[0].tolist()
    [[0.0, 17.0, 12.0, 25.0, 2.0]]
    """
    boxes = []
    for heatmap, size, mask, offset in zip(heatmaps, wh_targets, wh_masks, center_reg_targets):
        ys, xs = np.nonzero(mask[0])
        width, height = size[:, ys, xs]
        center_x, center_y = xs + offset[0, ys, xs], ys + offset[1, ys, xs]
        corners = np.stack([center_x - width / 2, center_y - height / 2,
                            center_x + width / 2, center_y + height / 2], axis=1) * scale
        classes = heatmap[:, ys, xs].argmax(axis=0)
        boxes.append(np.concatenate([corners, classes[:, None]], axis=1))
    return boxes


def _check_output_size(net, name, size):
    """Exit with a message unless the network's heatmap is the transform's target grid."""
    expected = (int(size // net.scale),) * 2
    with autograd.train_mode():
        heatmap = net(mx.sym.var('data'))[0]  # symbolic: shapes only, nothing computed
    try:
        _, (shape,), _ = heatmap.infer_shape(data=(1, 3, size, size))
    except mx.base.MXNetError:
        shape = None
    if shape is None or shape[2:] != expected:
        found = ('its heatmap would be %dx%d' % shape[2:] if shape else
                 'the network cannot take that size')
        raise SystemExit('--data-shape %d does not fit %s: %s, the targets %dx%d; use a '
                         'multiple of 32' % ((size, name, found) + expected))


def build(args: argparse.Namespace) -> dict[str, Any]:
    """Network, datasets and the two loaders for ``args``; returns a dict of them."""
    from ..transforms.presets.center_net import (CenterNetDefaultTrainTransform,
                                                 CenterNetDefaultValTransform)
    from gluoncv.model_zoo import get_model

    from .. import batchify

    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        net = get_model(args.network, pretrained=False, pretrained_base=False)
        net.initialize()
    size = args.data_shape or 512
    _check_output_size(net, args.network, size)
    train_base = detection_dataset(args)
    num_class = len(train_base.classes)
    train_data = train_base.transform(CenterNetDefaultTrainTransform(
        size, size, num_class=num_class, scale_factor=net.scale, targets=False, deferred=True))
    val_data = detection_dataset(args, split='val').transform(
        CenterNetDefaultValTransform(size, size))
    order = train_order(args, train_base)  # --shards: a window at a time
    train_loader, val_loader, _ = detector_loaders(args, train_data, val_data, order)

    def gluoncv_loader(gcv):
        """train_center_net.py's loader: gluoncv's preset with its targets, stacked."""
        from gluoncv.data.transforms.presets import center_net

        transform = center_net.CenterNetDefaultTrainTransform(
            size, size, num_class=num_class, scale_factor=net.scale)
        return train_loader(gluoncv_batchify(gcv), train_base.transform(transform),
                            seed=None)

    return {'net': net, 'train_loader': train_loader, 'val_loader': val_loader,
            'train_batchify': batchify.CenterNetTrainBatchify(num_class, net.scale),
            'train_data': train_data, 'train_base': train_base,
            'gluoncv_loader': gluoncv_loader, 'seed': args.seed}


def train_steps(net: gluon.HybridBlock, batches: Sequence[Sequence[NDArray]], steps: int,
                learning_rate: float = SGD['learning_rate']) -> list[float]:
    """Run ``steps`` SGD iterations of CenterNet's three losses; returns the summed losses."""
    from gluoncv.loss import HeatmapFocalLoss, MaskedL1Loss

    heatmap_loss = HeatmapFocalLoss(from_logits=True)  # the net already applies the sigmoid
    wh_loss = MaskedL1Loss(weight=WH_WEIGHT)
    center_reg_loss = MaskedL1Loss(weight=CENTER_REG_WEIGHT)
    # as gluoncv's script: no weight decay on the heads and on biases
    for param in list(net.collect_params('.*heads').values()) + \
            list(net.collect_params('.*bias').values()):
        param.wd_mult = 0.0
    trainer = gluon.Trainer(net.collect_params(), 'sgd', dict(SGD, learning_rate=learning_rate))
    losses = []
    for step in range(steps):
        images, heatmaps, wh, wh_masks, center_reg, center_reg_masks = (
            field.as_in_context(mx.cpu()) for field in batches[step % len(batches)])
        with autograd.record():
            heatmap_pred, wh_pred, center_reg_pred = net(images)
            total = (heatmap_loss(heatmap_pred, heatmaps) + wh_loss(wh_pred, wh, wh_masks)
                     + center_reg_loss(center_reg_pred, center_reg, center_reg_masks))
            autograd.backward(total)
        trainer.step(1)  # the losses are already means over the batch
        losses.append(float(total.asscalar()))
    return losses


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CenterNet loaders (and optionally training steps); returns the exit code."""
    parser = loader_parser('center_net_loader', __doc__.split('\n')[0], 8, 'data-shape',
                           DEFAULT_NETWORK)
    return run_example('CenterNet', parser, argv, build, (TRAIN_FIELDS, VAL_FIELDS),
                       train_steps)


if __name__ == '__main__':
    sys.exit(main())
