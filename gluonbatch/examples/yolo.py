"""YOLOv3 loaders as gluoncv's ``train_yolo3.py`` builds them, on gluonbatch presets and batchify.

Train batches are what gluoncv's script batchifies (image, objectness, center, scale,
weight and class targets, and the ground-truth boxes padded with -1), made here by
gluonbatch's ``YOLO3DefaultTrainTransform`` without the network and
``YOLO3TrainBatchify(net)``, which computes the targets of the whole batch at once;
validation batches are ``Tuple(Stack(), Pad(pad_val=-1))``. ``--train-steps K`` runs K
iterations of the losses the network computes in training mode, backward and an SGD step.
"""
import argparse
import sys
import types
import warnings
from collections.abc import Sequence
from typing import Any

import mxnet as mx
from mxnet import autograd, gluon

from .._core.typing import BatchifyFn, NDArray
from .runner import (detection_dataset, detector_loaders, loader_parser, run_example,
                     train_order)

__all__ = ['TRAIN_FIELDS', 'VAL_FIELDS', 'gluoncv_batchify', 'build', 'train_steps', 'main']

#: The names of a train batch's fields, in order.
TRAIN_FIELDS = ('image', 'objectness', 'center_targets', 'scale_targets', 'weights',
                'class_targets', 'gt_boxes')
#: The names of a validation batch's fields, in order.
VAL_FIELDS = ('image', 'label')


def gluoncv_batchify(module: types.ModuleType) -> BatchifyFn:
    """train_yolo3.py's batchify, built from ``module`` (gluoncv's batchify module)."""
    return module.Tuple(*([module.Stack() for _ in range(6)] + [module.Pad(axis=0, pad_val=-1)]))


def build(args: argparse.Namespace) -> dict[str, Any]:
    """Network, datasets and the two loaders for ``args``; returns a dict of them."""
    from ..transforms.presets.yolo import YOLO3DefaultTrainTransform, YOLO3DefaultValTransform
    from gluoncv.model_zoo import get_model

    from .. import batchify

    net = get_model(args.network, pretrained=False, pretrained_base=False)
    net.initialize()
    size = args.data_shape or 320
    train_base = detection_dataset(args)
    # deferred: the batchify function writes each image's last pass straight into the batch
    train_data = train_base.transform(YOLO3DefaultTrainTransform(size, size, deferred=True))
    val_data = detection_dataset(args, split='val').transform(
        YOLO3DefaultValTransform(size, size))
    order = train_order(args, train_base)  # --shards: a window at a time
    train_loader, val_loader, _ = detector_loaders(args, train_data, val_data, order)

    def gluoncv_loader(gcv):
        """train_yolo3.py's loader: gluoncv's preset with the network's targets."""
        from gluoncv.data.transforms.presets import yolo

        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            transform = yolo.YOLO3DefaultTrainTransform(size, size, net)
        return train_loader(gluoncv_batchify(gcv), train_base.transform(transform),
                            seed=None)

    return {'net': net, 'train_loader': train_loader, 'val_loader': val_loader,
            'train_batchify': batchify.YOLO3TrainBatchify(net), 'train_data': train_data,
            'gluoncv_loader': gluoncv_loader, 'seed': args.seed}


def train_steps(net: gluon.HybridBlock, batches: Sequence[Sequence[NDArray]], steps: int,
                learning_rate: float = 0.001) -> list[float]:
    """Run ``steps`` SGD iterations of YOLOv3's own losses; returns the summed losses."""
    trainer = gluon.Trainer(net.collect_params(), 'sgd',
                            {'learning_rate': learning_rate, 'wd': 0.0005, 'momentum': 0.9})
    losses = []
    for step in range(steps):
        batch = [field.as_in_context(mx.cpu()) for field in batches[step % len(batches)]]
        images, targets, gt_boxes = batch[0], batch[1:6], batch[6]
        with autograd.record():
            obj, center, scale, cls = net(images, gt_boxes, *targets)
            total = obj + center + scale + cls
            autograd.backward(total)
        trainer.step(images.shape[0])
        losses.append(float(total.sum().asscalar()))
    return losses


def main(argv: Sequence[str] | None = None) -> int:
    """Run the YOLOv3 loaders (and optionally training steps); returns the exit code."""
    parser = loader_parser('yolo_loader', __doc__.split('\n')[0], 8, 'data-shape',
                           'yolo3_mobilenet0.25_voc')
    return run_example('YOLOv3', parser, argv, build, (TRAIN_FIELDS, VAL_FIELDS), train_steps)


if __name__ == '__main__':
    sys.exit(main())
