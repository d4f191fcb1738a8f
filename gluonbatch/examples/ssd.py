"""SSD loaders the way gluoncv's ``train_ssd.py`` builds them, on gluonbatch presets and batchify.

Train batches are what gluoncv's script batchifies, images and the class and box targets
of the network's anchors, made here by gluonbatch's ``SSDDefaultTrainTransform`` without
anchors and ``SSDTrainBatchify(anchors)``, which computes the targets of the whole batch
at once; validation batches are ``Tuple(Stack(), Pad(pad_val=-1))`` of images and padded
labels.
``--train-steps K`` runs K iterations of SSD's multibox loss, backward and an SGD step.
"""
import argparse
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import mxnet as mx
from mxnet import autograd, gluon

from .._core.typing import NDArray
from ..batchify import SSDTrainBatchify
from .runner import (detection_dataset, detector_loaders, loader_parser, run_example,
                     train_order)

__all__ = ['TRAIN_FIELDS', 'VAL_FIELDS', 'build', 'train_steps', 'main']

#: The names of a train batch's fields, in order.
TRAIN_FIELDS = ('image', 'cls_targets', 'box_targets')
#: The names of a validation batch's fields, in order.
VAL_FIELDS = ('image', 'label')


def build(args: argparse.Namespace) -> dict[str, Any]:
    """Network, datasets and the two loaders for ``args``; returns a dict of them."""
    from ..transforms.presets.ssd import SSDDefaultTrainTransform, SSDDefaultValTransform
    from gluoncv.model_zoo import get_model

    with warnings.catch_warnings():
        # gluoncv's SSD wraps its base network's symbol in a SymbolBlock whose input has no
        # dtype yet, and MXNet warns as it infers the parameters' types (float32, as meant)
        warnings.filterwarnings('ignore', 'Cannot decide type for the following arguments',
                                UserWarning)
        net = get_model(args.network, pretrained=False, pretrained_base=False)
    net.initialize()
    size = args.data_shape or 300
    with autograd.train_mode():
        _, _, anchors = net(mx.nd.zeros((1, 3, size, size)))
    train_base = detection_dataset(args)
    # deferred: the batchify function writes each image's last pass straight into the batch
    train_data = train_base.transform(SSDDefaultTrainTransform(size, size, deferred=True))
    val_data = detection_dataset(args, split='val').transform(SSDDefaultValTransform(size, size))
    order = train_order(args, train_base)  # --shards: a window at a time
    train_loader, val_loader, val_batchify = detector_loaders(args, train_data, val_data, order)

    def gluoncv_loader(gcv):
        """train_ssd.py's loader: gluoncv's preset with the anchors' targets, stacked."""
        from gluoncv.data.transforms.presets import ssd

        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # gluoncv's target generator warns on creation
            transform = ssd.SSDDefaultTrainTransform(size, size, anchors)
        return train_loader(gcv.Tuple(gcv.Stack(), gcv.Stack(), gcv.Stack()),
                            train_base.transform(transform), seed=None)

    return {'net': net, 'train_loader': train_loader, 'val_loader': val_loader,
            'train_batchify': SSDTrainBatchify(anchors), 'train_data': train_data,
            'val_data': val_data,
            'gluoncv_loader': gluoncv_loader, 'val_batchify': val_batchify, 'seed': args.seed}


def train_steps(net: gluon.HybridBlock, batches: Sequence[Sequence[NDArray]], steps: int,
                learning_rate: float = 0.001) -> list[float]:
    """Run ``steps`` SGD iterations of SSD's multibox loss; returns the losses."""
    from gluoncv.loss import SSDMultiBoxLoss

    loss_fn = SSDMultiBoxLoss()
    trainer = gluon.Trainer(net.collect_params(), 'sgd',
                            {'learning_rate': learning_rate, 'wd': 0.0005, 'momentum': 0.9})
    losses = []
    for step in range(steps):
        # as gluoncv's script does: each field onto the training device (here the CPU)
        images, cls_targets, box_targets = (
            field.as_in_context(mx.cpu()) for field in batches[step % len(batches)])
        with autograd.record():
            cls_preds, box_preds, _ = net(images)
            total, _, _ = loss_fn(cls_preds, box_preds, cls_targets, box_targets)
            autograd.backward(total)
        trainer.step(1)
        losses.append(float(sum(loss.sum().asscalar() for loss in total)))
    return losses


def main(argv: Sequence[str] | None = None) -> int:
    """Run the SSD loaders (and optionally training steps); returns the exit code."""
    parser = loader_parser('ssd_loader', __doc__.split('\n')[0], 8, 'data-shape',
                           'ssd_300_mobilenet0.25_voc')
    return run_example('SSD', parser, argv, build, (TRAIN_FIELDS, VAL_FIELDS), train_steps)


if __name__ == '__main__':
    sys.exit(main())
