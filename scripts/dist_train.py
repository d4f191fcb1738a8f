#!/usr/bin/env python
"""A few ``dist_sync`` training steps of a small gluon network, one part of the data per worker.

Run under ``scripts/launch_local.py`` (or MXNet's ``tools/launch.py``), which sets the
``DMLC_*`` variables::

    python scripts/launch_local.py --num-workers 2 -- \\
        python scripts/dist_train.py --steps 4 --report-dir /tmp/reports

Each worker creates the ``dist_sync`` kvstore, takes its part of a synthetic dataset with
``gluonbatch.samplers.split.SplitSampler(len, num_workers, rank, shuffle=True)`` (or, with
``--webdataset DIR``, of an image-text dataset the same way; with ``--shards DIR``, of a
detection dataset on shards in ``gluonbatch.samplers.ShardWindowSampler``'s order, a
window of ``--shard-window`` shards at a time; every rank opens the whole dataset and the
sampler deals it, ``gluonbatch.samplers.ranks.rank_positions``), loads it with a
``gluonbatch.DataLoader`` (``--num-loader-workers`` worker processes, replaced if they
die), batches it with gluonbatch (``Pad(num_shards=D)`` per device), splits every batch
onto ``--devices`` CPU contexts with ``DeviceLoader`` and trains with
``gluon.Trainer(..., kvstore=kv)``. With ``--report-dir`` every worker writes
``rank<R>.json``: the sample ids it loaded per epoch and its final parameters.

With ``--loader-seed S`` loading is seeded: each sample is augmented (a flip and a gain
drawn from numpy's and Python's generators) and named by its id and the SHA-256 of its
augmented image, and the rank's batches come from the loader made with ``seed=S`` and the
rank's ``SplitSampler`` (or ``ShardWindowSampler``, of seed ``S``): the ranks' batches of
a step, concatenated in rank order, are the global batch one rank loads with a
``--batch-size`` ``num_workers`` times as large, samples and augmentations alike. The
report then lists every step's sample names (``batches``).

In a scheduler or server process (``DMLC_ROLE`` is ``scheduler`` or ``server``),
``import mxnet`` runs the parameter server and exits; nothing below it runs there.
"""
import argparse
import hashlib
import json
import os
import random
import sys
import time
import warnings

import mxnet as mx  # in a scheduler/server process this line serves, then exits
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from gluonbatch import DataLoader  # noqa: E402
from gluonbatch._core import failures  # noqa: E402
from gluonbatch._core.argtypes import HelpFormatter  # noqa: E402
from gluonbatch.batchify import List, Pad, Stack, Tuple  # noqa: E402
from gluonbatch.devices import DeviceLoader  # noqa: E402
from gluonbatch.samplers.split import SplitSampler  # noqa: E402


def synthetic_dataset(num_samples, seed):
    """Sample i: a (1, h, w) picture of varying size, a target and the id i."""
    rng = np.random.RandomState(seed)
    samples = []
    for index in range(num_samples):
        height, width = rng.randint(6, 13, size=2)
        image = rng.uniform(-1, 1, size=(1, height, width)).astype('float32')
        samples.append((image, np.float32(image.mean() * 3 + 0.5), index))
    return mx.gluon.data.SimpleDataset(samples)


class Augment:
    """A random flip (numpy's generator) and gain (Python's) of a synthetic sample, named
    by its id and the SHA-256 of the augmented image: what a seeded run must reproduce."""

    def __call__(self, image, target, name):
        if np.random.rand() < 0.5:
            image = image[:, :, ::-1]
        image = np.ascontiguousarray(image * np.float32(0.5 + random.random()))
        return image, target, '%s:%s' % (name, hashlib.sha256(image.tobytes()).hexdigest()[:16])


class ShardSamples(mx.gluon.data.Dataset):
    """Record i of a detection dataset on shards as a sample: (CHW float image at an eighth
    of its size, the number of objects / 10, the record's key)."""

    def __init__(self, path):
        from gluonbatch.detection import DetectionShards

        self.shards = DetectionShards(path)
        self.shard_lengths = self.shards.shard_lengths

    def __len__(self):
        return len(self.shards)

    def __getitem__(self, i):
        image, label = self.shards[i][:2]
        chw = image.asnumpy()[::8, ::8].transpose((2, 0, 1)).astype('float32') / 255
        objects = 0 if label is None else len(label)  # None: an instance image without any
        return chw, np.float32(objects / 10), self.shards.record_id(i)


def webdataset_dataset(path, id_col):
    """An image-text dataset, all of it: (CHW float image, target, id)."""
    from gluonbatch.curation import ImageTextPairDataset

    dataset = ImageTextPairDataset.from_webdataset(path, id_col)

    def sample(image, caption, meta):
        chw = image.transpose((2, 0, 1)).astype('float32') / 255
        return chw, np.float32(len(caption.split()) / 10), str(meta[id_col])

    return dataset.transform(sample, lazy=True)


def shard_loader(args, rank, num_workers):
    """This rank's loader over the detection shards of ``--shards``: every rank opens the
    whole dataset and reads its equal part of the window order."""
    from gluonbatch.samplers import ShardWindowSampler

    dataset = ShardSamples(args.shards)
    seed = args.seed if args.loader_seed is None else args.loader_seed
    order = ShardWindowSampler(dataset, window=args.shard_window, seed=seed,
                               num_parts=num_workers, part_index=rank, last_part=args.last_part)
    batchify = Tuple(Pad(axis=(1, 2), num_shards=args.devices), Stack(), List())
    if args.loader_seed is None:
        return DataLoader(dataset, batch_size=args.batch_size, sampler=order,
                          last_batch='keep', batchify_fn=batchify,
                          num_workers=args.num_loader_workers)
    # the seeded loader follows the window order (of the same seed) and takes its rank,
    # dealing the order a batch at a time
    return DataLoader(dataset.transform(Augment()), batch_size=args.batch_size, sampler=order,
                      last_batch={'pad': 'pad', 'drop': 'discard'}[args.last_part],
                      batchify_fn=batchify,
                      num_workers=args.num_loader_workers, seed=args.loader_seed)


def make_loader(args, rank, num_workers, ctx_list):
    """This rank's loader: a ``DeviceLoader`` over ``ctx_list`` of a ``gluonbatch.DataLoader``
    (its ``set_epoch`` starts an epoch; ``loader.loader.close()`` stops its workers)."""
    if args.shards:
        return DeviceLoader(shard_loader(args, rank, num_workers), ctx_list)
    batchify = Tuple(Pad(axis=(1, 2), num_shards=args.devices), Stack(), List())
    if args.loader_seed is not None:
        dataset = synthetic_dataset(args.samples, args.seed).transform(Augment())
        # every rank its slice of each global batch: the seeded loader takes the
        # SplitSampler's rank (the seed orders the samples; its own seed is not used)
        batches = DataLoader(
            dataset, batch_size=args.batch_size,
            sampler=SplitSampler(len(dataset), num_workers, rank, shuffle=True),
            last_batch={'pad': 'pad', 'drop': 'discard'}[args.last_part],
            batchify_fn=batchify, num_workers=args.num_loader_workers, seed=args.loader_seed)
    else:
        if args.webdataset:
            dataset = webdataset_dataset(args.webdataset, args.id_col)
        else:
            dataset = synthetic_dataset(args.samples, args.seed)
        sampler = SplitSampler(len(dataset), num_workers, rank, shuffle=True, seed=args.seed,
                               last_part=args.last_part)
        batches = DataLoader(
            dataset, batch_size=args.batch_size, sampler=sampler, last_batch='keep',
            batchify_fn=batchify, num_workers=args.num_loader_workers)
    return DeviceLoader(batches, ctx_list)


def build_net(ctx_list, seed):
    mx.random.seed(seed)
    net = mx.gluon.nn.HybridSequential()
    net.add(mx.gluon.nn.Conv2D(4, 3, padding=1, activation='relu'),
            mx.gluon.nn.GlobalAvgPool2D(), mx.gluon.nn.Dense(1))
    net.initialize(mx.init.Xavier(), ctx=ctx_list)
    return net


def parameters(net):
    """name -> values as nested lists (float32 values survive JSON exactly)."""
    return {name: param.data(param.list_ctx()[0]).asnumpy().tolist()
            for name, param in sorted(net.collect_params().items())}


def digest(params):
    return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument('--steps', type=int, default=4, help='training steps (batches)')
    parser.add_argument('--batch-size', type=int, default=8, help='per worker')
    parser.add_argument('--samples', type=int, default=64, help='synthetic dataset size')
    parser.add_argument('--devices', type=int, default=2,
                        help='CPU contexts per worker, one slice of every batch each')
    parser.add_argument('--last-part', choices=('pad', 'drop'), default='pad')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--num-loader-workers', type=int, default=0)
    parser.add_argument('--webdataset', metavar='DIR',
                        help='train on this rank\'s part of an image-text dataset '
                             '(gluonbatch.curation) instead of synthetic data')
    parser.add_argument('--id-col', default='key', help='id column of --webdataset')
    parser.add_argument('--shards', metavar='DIR',
                        help='train on this rank\'s part of a detection dataset on shards '
                             '(gluonbatch wds from-voc or from-coco) instead of synthetic data')
    parser.add_argument('--shard-window', type=int, default=4, metavar='W',
                        help='--shards: shards whose samples are shuffled together')
    parser.add_argument('--report-dir', help='write rank<R>.json here')
    parser.add_argument('--loader-seed', type=int, default=None,
                        help='seeded loading: every step\'s samples and augmentations a '
                             'function of this seed, the same global batch for any number '
                             'of workers (synthetic data or --shards)')
    parser.add_argument('--kvstore', default='dist_sync')
    parser.add_argument('--fail-rank', type=int, default=None,
                        help='(testing) this rank exits with status 3 after one step')
    args = parser.parse_args(argv)
    if args.shards and args.webdataset:
        parser.error('give --shards (detection) or --webdataset (image-text), not both')
    if args.loader_seed is not None and args.webdataset:
        parser.error('--loader-seed takes the synthetic dataset, not --webdataset')
    # bad data (a damaged shard, say) is one line naming the file, exit 1
    return failures.report(parser.prog, lambda: train(args), parser)


def train(args):
    """Train for ``args.steps`` steps on this rank; returns the exit code."""
    # Pad(num_shards=D) warns when a (last) batch has fewer samples than D
    warnings.filterwarnings('ignore', message='num_shards=.* is larger than the batch')
    kv = mx.kv.create(args.kvstore)
    rank, num_workers = kv.rank, kv.num_workers
    ctx_list = [mx.cpu(i) for i in range(args.devices)]
    started = time.time()

    loader = make_loader(args, rank, num_workers, ctx_list)

    net = build_net(ctx_list, args.seed)
    trainer = mx.gluon.Trainer(net.collect_params(), 'sgd',
                               {'learning_rate': 0.1, 'momentum': 0.9}, kvstore=kv)
    loss_fn = mx.gluon.loss.L2Loss()

    seen, steps, losses, step, epoch = {}, [], [], 0, 0
    while step < args.steps:
        loader.set_epoch(epoch)
        ids = seen.setdefault(str(epoch), [])
        for per_device in loader:
            batch_size = sum(len(names) for _, _, names in per_device)
            if len(per_device) < len(ctx_list):
                # a short last batch leaves devices idle: their gradients must not count
                # again (backward only overwrites the gradients of the devices it ran on)
                net.collect_params().zero_grad()
            with mx.autograd.record():
                # the mean over the whole batch (all devices); the last batch of an epoch
                # may be short, and a dist kvstore that updates on the servers needs one
                # constant trainer.step() scale, so the loss is normalized here instead
                batch_losses = [loss_fn(net(x), y).sum() / batch_size
                                for x, y, _ in per_device]
            for loss in batch_losses:
                loss.backward()
            trainer.step(1)
            steps.append([name for _, _, names in per_device for name in names])
            ids.extend(steps[-1])
            losses.append(float(sum(loss.asscalar() for loss in batch_losses)))
            step += 1
            if args.fail_rank == rank:
                print('rank %d fails on purpose' % rank, flush=True)
                os._exit(3)
            if step == args.steps:
                break
        epoch += 1
    mx.nd.waitall()
    loader.loader.close()  # stop the loader's workers now, not as the interpreter exits

    params = parameters(net)
    report = {'rank': rank, 'num_workers': num_workers, 'steps': step,
              'batches_per_epoch': len(loader), 'seen': seen, 'batches': steps,
              'losses': losses,
              'params': params, 'digest': digest(params),
              'seconds': round(time.time() - started, 3)}
    print('rank %d/%d: %d steps, loss %.4f -> %.4f, parameters %s'
          % (rank, num_workers, step, losses[0], losses[-1], report['digest'][:12]), flush=True)
    if args.report_dir:
        os.makedirs(args.report_dir, exist_ok=True)
        path = os.path.join(args.report_dir, 'rank%d.json' % rank)
        with open(path + '.tmp', 'w') as out:
            json.dump(report, out)
        os.replace(path + '.tmp', path)
    return 0


if __name__ == '__main__':
    sys.exit(main())
