"""Faster R-CNN and Mask R-CNN loaders the way gluoncv's train scripts build them.

Train batches come from :class:`gluonbatch.batchify.FasterRCNNTrainBatchify` /
:class:`gluonbatch.batchify.MaskRCNNTrainBatchify` for ``--num-devices`` devices, fed by a
batch sampler that groups images of similar aspect ratio (so little of each batch is padding):
gluoncv's ``SplitSortedBucketSampler`` in its scripts, here its seeded counterpart
:class:`~gluonbatch.samplers.SeededBucketSampler` in a seeded :class:`gluonbatch.DataLoader`
(the same batches for any ``--num-workers``); validation batches are ``Append()`` per field
(image, boxes and scale; for Mask R-CNN image and image info).
``--train-steps K`` runs K iterations of the RPN and R-CNN losses (and the mask loss),
backward and an SGD step, one forward per device slice as on one device per slice.
"""
import argparse
import functools
import sys
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import mxnet as mx
from mxnet import autograd, gluon

from ..batchify import Append, Tuple
from ..batchify.rcnn import FasterRCNNTrainBatchify, MaskRCNNTrainBatchify
from ..dataloader import DataLoader
from ..samplers import SeededBucketSampler
from .runner import detection_dataset, device_slices, loader_parser, run_example

__all__ = ['TRAIN_FIELDS', 'VAL_FIELDS', 'DEFAULT_NETWORKS', 'aspect_ratios', 'build',
           'train_steps', 'main', 'main_faster', 'main_mask']

#: Per kind, the names of a train batch's fields, in order.
TRAIN_FIELDS = {'faster': ('image', 'boxes', 'rpn_cls_targets', 'rpn_box_targets',
                           'rpn_box_masks'),
                'mask': ('image', 'boxes', 'masks', 'rpn_cls_targets', 'rpn_box_targets',
                         'rpn_box_masks')}
#: Per kind, the names of a validation batch's fields, in order.
VAL_FIELDS = {'faster': ('image', 'boxes', 'scale'), 'mask': ('image', 'im_info')}
#: Per kind, the network of gluoncv's model zoo built by default.
DEFAULT_NETWORKS = {'faster': 'faster_rcnn_resnet50_v1b_voc',
                    'mask': 'mask_rcnn_resnet18_v1b_coco'}


def aspect_ratios(dataset: mx.gluon.data.Dataset) -> list[float]:
    """Width / height per image: from the dataset if it knows them, else by reading them."""
    known = getattr(dataset, 'get_im_aspect_ratio', None)
    if known is not None:
        return list(known())
    return [image.shape[1] / image.shape[0] for image, *_ in dataset]


def build(kind: Literal['faster', 'mask'], args: argparse.Namespace) -> dict[str, Any]:
    """Network, datasets and loaders for ``kind`` ('faster' or 'mask')."""
    from gluoncv.data.sampler import SplitSortedBucketSampler
    from gluoncv.model_zoo import get_model

    from ..transforms.presets import rcnn as presets

    if args.batch_size % args.num_devices:
        raise SystemExit('--batch-size %d must be a multiple of --num-devices %d'
                         % (args.batch_size, args.num_devices))
    net = get_model(args.network, pretrained=False, pretrained_base=False,
                    per_device_batch_size=args.batch_size // args.num_devices)
    net.initialize()
    short, max_size = args.short or 320, args.max_size or 512
    multi_stage = 'fpn' in args.network
    train_cls, val_cls, batchify_cls = (
        (presets.MaskRCNNDefaultTrainTransform, presets.MaskRCNNDefaultValTransform,
         MaskRCNNTrainBatchify) if kind == 'mask' else
        (presets.FasterRCNNDefaultTrainTransform,
         presets.FasterRCNNDefaultValTransform, FasterRCNNTrainBatchify))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        train_transform = train_cls(short, max_size, net, multi_stage=multi_stage)
    train_base = detection_dataset(args, masks=kind == 'mask')
    train_data = train_base.transform(train_transform)
    val_data = detection_dataset(args, masks=kind == 'mask', split='val').transform(
        val_cls(short, max_size))
    ratios = aspect_ratios(train_base)
    sampler = SeededBucketSampler(ratios, args.batch_size, seed=args.seed)

    def train_loader(batchify_fn):
        # seed= (the sampler's): each sample read with its generators seeded from its key
        return DataLoader(train_data, batch_sampler=sampler, batchify_fn=batchify_fn,
                          num_workers=args.num_workers, seed=args.seed)

    val_loader = DataLoader(val_data, args.num_devices, shuffle=False, last_batch='keep',
                            num_workers=args.num_workers,
                            batchify_fn=Tuple([Append() for _ in VAL_FIELDS[kind]]))

    def gluoncv_loader(gcv):
        """gluoncv's script's loader: its preset, sampler and batchify, unseeded."""
        from gluoncv.data.transforms.presets import rcnn as theirs

        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            transform = getattr(theirs, train_cls.__name__)(short, max_size, net,
                                                            multi_stage=multi_stage)
        return DataLoader(
            train_base.transform(transform),
            batch_sampler=SplitSortedBucketSampler(ratios, args.batch_size, shuffle=True,
                                                   seed=args.seed),
            batchify_fn=getattr(gcv, batchify_cls.__name__)(net, args.num_devices),
            num_workers=args.num_workers)

    return {'net': net, 'train_loader': train_loader, 'val_loader': val_loader,
            'train_batchify': batchify_cls(net, args.num_devices), 'train_data': train_data,
            'sampler': sampler, 'gluoncv_loader': gluoncv_loader, 'seed': args.seed}


def _take_rows(value, indices):
    """Per image ``i``, the entries of ``value[i]`` at ``indices[i]``."""
    return mx.nd.stack(*[mx.nd.take(value[i], indices[i]) for i in range(indices.shape[0])])


def train_steps(kind: Literal['faster', 'mask'], net: gluon.HybridBlock,
                batches: Sequence[Sequence[Any]], steps: int,
                learning_rate: float = 0.001) -> list[float]:
    """Run ``steps`` SGD iterations of the R-CNN losses; returns the total losses."""
    rpn_cls_loss = gluon.loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)
    rpn_box_loss = gluon.loss.HuberLoss(rho=1 / 9.)
    rcnn_cls_loss = gluon.loss.SoftmaxCrossEntropyLoss()
    rcnn_box_loss = gluon.loss.HuberLoss()
    mask_loss = gluon.loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=False)
    trainer = gluon.Trainer(net.collect_params(), 'sgd',
                            {'learning_rate': learning_rate, 'wd': 0.0001, 'momentum': 0.9})
    # Device slices are forwarded one after the other on this one device, each with its own
    # backward, their gradients summed (what separate devices would all-reduce).
    params = net.collect_params()
    params.setattr('grad_req', 'add')
    losses = []
    for step in range(steps):
        batch = batches[step % len(batches)]
        if kind == 'mask':
            images, labels, masks, rpn_cls, rpn_box, rpn_mask = batch
        else:
            (images, labels, rpn_cls, rpn_box, rpn_mask), masks = batch, None
        params.zero_grad()
        loss = 0.0
        for device, fields in enumerate(zip(device_slices(images), device_slices(labels),
                                            rpn_cls, rpn_box, rpn_mask)):
            image, label, slice_rpn_cls, slice_rpn_box, slice_rpn_mask = (
                field.as_in_context(mx.cpu()) for field in fields)
            with autograd.record():
                outputs = net(image, label[:, :, :4], label[:, :, 4:5])
                if kind == 'mask':
                    mask_pred = outputs[2]
                    outputs = outputs[:2] + outputs[3:]
                (cls_pred, box_pred, roi, _, matches, rpn_score, rpn_box_pred, _, cls_targets,
                 box_targets, box_masks, indices) = outputs
                rpn_score = rpn_score.squeeze(axis=-1)
                num_rpn_pos = (slice_rpn_cls >= 0).sum()
                total = (rpn_cls_loss(rpn_score, slice_rpn_cls, slice_rpn_cls >= 0)
                         * slice_rpn_cls.size / num_rpn_pos
                         + rpn_box_loss(rpn_box_pred, slice_rpn_box, slice_rpn_mask)
                         * rpn_box_pred.size / num_rpn_pos).sum()
                num_rcnn_pos = (cls_targets >= 0).sum()
                total = total + (rcnn_cls_loss(cls_pred, cls_targets,
                                               cls_targets.expand_dims(-1) >= 0)
                                 * cls_targets.size / num_rcnn_pos
                                 + rcnn_box_loss(box_pred, box_targets, box_masks)
                                 * box_pred.size / num_rcnn_pos).sum()
                if kind == 'mask':
                    # the mask head only sees the sampled rois that ``indices`` picks
                    roi, matches, picked_cls = (_take_rows(value, indices)
                                                for value in (roi, matches, cls_targets))
                    gt_masks = device_slices(masks)[device].as_in_context(mx.cpu())
                    mask_targets, mask_masks = net.mask_target(roi, gt_masks, matches,
                                                               picked_cls)
                    total = total + (mask_loss(mask_pred, mask_targets, mask_masks)
                                     * mask_targets.size / mask_masks.sum()).sum()
            total.backward()
            loss += total.asscalar()
        trainer.step(1)
        losses.append(loss)
    return losses


def main(kind: Literal['faster', 'mask'], argv: Sequence[str] | None = None) -> int:
    """Run the loaders for ``kind`` ('faster' or 'mask'); returns the exit code."""
    title = {'faster': 'Faster R-CNN', 'mask': 'Mask R-CNN'}[kind]
    parser = loader_parser('%s_rcnn_loader' % kind, '%s loaders on gluonbatch batchify'
                           % title, 2, 'short', DEFAULT_NETWORKS[kind])
    return run_example(title, parser, argv, functools.partial(build, kind),
                       (TRAIN_FIELDS[kind], VAL_FIELDS[kind]),
                       functools.partial(train_steps, kind))


def main_faster(argv: Sequence[str] | None = None) -> int:
    """``faster_rcnn_loader`` entry point."""
    return main('faster', argv)


def main_mask(argv: Sequence[str] | None = None) -> int:
    """``mask_rcnn_loader`` entry point."""
    return main('mask', argv)


if __name__ == '__main__':
    sys.exit(main_faster())
