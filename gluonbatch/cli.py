"""The ``gluonbatch`` command: ``demo``, ``bench``, ``show`` and ``wds``.

>>> main(['--help'])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
SystemExit: 0
"""
import argparse
import os
import sys

from ._args import non_negative_int, positive_int

__all__ = ['main']


def _demo(args):
    from .examples import rcnn, ssd
    from .examples.runner import loader_parser
    from .examples.show import show_batch

    common = ['--batches', str(args.batches), '--num-workers', str(args.num_workers)]
    print('== Faster R-CNN loader (embedded data, 2 shards) ==')
    rcnn.main_faster(common + ['--batch-size', '4', '--num-shards', '2'])
    print('\n== SSD loader (embedded data) ==')
    ssd.main(common + ['--batch-size', '8'])
    parser = loader_parser('demo', 'demo', 4, 'short', rcnn.DEFAULT_NETWORKS['faster'])
    picture_args = parser.parse_args(['--batch-size', '4', '--num-shards', '2',
                                      '--no-progress'])
    path = show_batch('faster_rcnn', picture_args, os.path.abspath(args.output))
    print('\nThe first Faster R-CNN batch is drawn in %s' % path)
    return 0


def _show(args):
    from .examples import rcnn
    from .examples.runner import loader_parser
    from .examples.show import show_batch

    image = 'short' if args.loader == 'faster_rcnn' else 'data-shape'
    networks = {'ssd': 'ssd_300_mobilenet0.25_voc', 'yolo': 'yolo3_mobilenet0.25_voc',
                'faster_rcnn': rcnn.DEFAULT_NETWORKS['faster']}
    parser = loader_parser('gluonbatch show', 'show', args.batch_size, image,
                           networks[args.loader])
    options = parser.parse_args(['--batch-size', str(args.batch_size), '--num-shards',
                                 str(args.num_shards), '--no-progress'])
    print(show_batch(args.loader, options, os.path.abspath(args.output)))
    return 0


def _wds_index(args):
    from .webdataset import write_index

    if args.output is not None and len(args.tar) > 1:
        raise ValueError('--output names one index file; %d tar files were given'
                         % len(args.tar))
    for tar in args.tar:
        path = write_index(tar, args.output)
        with open(path, encoding='utf-8') as handle:
            samples = int(handle.readline().split()[1])
        print('%s: %d samples' % (path, samples))
    return 0


def _shorten(text, width):
    text = ' '.join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + '...'


def _wds_inspect(args):
    from .webdataset import ImageTextPairDataset

    ds = ImageTextPairDataset.from_webdataset(args.dir, args.id_col)
    indexed = sum(os.path.exists(tar[:-len('.tar')] + '.idx') for tar in ds.tar_files)
    tar_bytes = sum(os.path.getsize(tar) for tar in ds.tar_files)
    print('%s: %d shards (%d with .idx), %d records, %.1f MB of tar'
          % (ds.path, len(ds.tar_files), indexed, len(ds), tar_bytes / 1e6))
    print('columns: %s' % ', '.join('%s (%s)' % (name, dtype)
                                    for name, dtype in ds.metadata.dtypes.items()))
    failed = 0
    shown = min(args.records, len(ds))
    if shown:
        print('first %d records:' % shown)
    for i in range(shown):
        key = ds.metadata[ds.id_col].iloc[i]
        try:
            image, caption, meta = ds[i]
        except ValueError as err:
            failed += 1
            print('  %s  error: %s' % (key, err))
            continue
        print('  %s  image %s  caption %r  json keys %s'
              % (key, 'x'.join(map(str, image.shape)), _shorten(caption, 60),
                 _shorten(sorted(meta), 60)))
    return 1 if failed else 0


def _wds_reshard(args):
    from .webdataset import ImageTextPairDataset

    ds = ImageTextPairDataset.from_webdataset(args.src, args.id_col)
    tars = ds.to_webdataset(args.dst, args.filter_column,
                            samples_per_shard=args.samples_per_shard,
                            max_shards=args.max_shards, old_id_col=args.old_id_col)
    kept = len(ds) if args.filter_column is None else int(ds.metadata[args.filter_column].sum())
    if tars:
        print('%s: %d of %d records in %d shards (%s .. %s)'
              % (os.path.abspath(args.dst), kept, len(ds), len(tars),
                 os.path.basename(tars[0]), os.path.basename(tars[-1])))
    else:
        print('no record of %s has %s True; nothing written' % (ds.path, args.filter_column))
    return 0


def _add_wds_parser(commands):
    wds = commands.add_parser('wds', help='sharded image-text datasets (NNNNN.tar + '
                                          '.parquet + .idx): index, inspect, reshard')
    actions = wds.add_subparsers(dest='wds_command', required=True, metavar='ACTION')

    index = actions.add_parser('index', help='write the v1.2 .idx file of tar files')
    index.add_argument('tar', nargs='+', help='tar file(s)')
    index.add_argument('--output', '-o', metavar='IDX',
                       help='index file to write (one tar only; default: beside the tar)')
    index.set_defaults(run=_wds_index)

    inspect = actions.add_parser('inspect', help='shards, records, columns and the first '
                                                 'records of a dataset directory')
    inspect.add_argument('dir', help='dataset directory')
    inspect.add_argument('--id-col', default='key', help='id column (default: key)')
    inspect.add_argument('--records', type=non_negative_int, default=3, metavar='N',
                         help='decode and show the first N records (default 3)')
    inspect.set_defaults(run=_wds_inspect)

    reshard = actions.add_parser('reshard', help='write the records whose filter column is '
                                                 'True as a new, renumbered dataset')
    reshard.add_argument('src', help='source dataset directory')
    reshard.add_argument('dst', help='destination directory (not the source)')
    reshard.add_argument('--filter-column', metavar='COL',
                         help='bool parquet column: keep records where it is True '
                              '(default: keep every record)')
    reshard.add_argument('--samples-per-shard', type=positive_int, default=10000, metavar='N')
    reshard.add_argument('--max-shards', type=positive_int, default=5, metavar='N',
                         help='digits of the shard number (default 5)')
    reshard.add_argument('--old-id-col', metavar='NAME',
                         help='keep the previous ids in this new column')
    reshard.add_argument('--id-col', default='key', help='id column (default: key)')
    reshard.set_defaults(run=_wds_reshard)


def build_parser():
    """The argument parser of the ``gluonbatch`` command."""
    parser = argparse.ArgumentParser(
        prog='gluonbatch', description='Fast shared-memory batches for MXNet Gluon: example '
                                       'loaders, benchmark and batch pictures.')
    commands = parser.add_subparsers(dest='command', required=True, metavar='COMMAND')

    demo = commands.add_parser('demo', help='run the Faster R-CNN and SSD loaders on embedded '
                                            'data and draw a batch')
    demo.add_argument('-o', '--output', default='demo_batch.png', help='PNG to write')
    demo.add_argument('--batches', type=positive_int, default=4)
    demo.add_argument('--num-workers', type=int, choices=range(0, 65), default=2,
                      metavar='N', help='DataLoader worker processes (default 2)')
    demo.set_defaults(run=_demo)

    # listed for --help; `main` hands everything after "bench" to the benchmark itself
    commands.add_parser('bench', help='the benchmark table (gluonbatch vs gluoncv vs the '
                                      'floor); gluonbatch bench --help for its options',
                        add_help=False)

    show = commands.add_parser('show', help='draw the first batch of an example loader')
    show.add_argument('--loader', required=True, choices=('ssd', 'yolo', 'faster_rcnn'))
    show.add_argument('-o', '--output', default='batch.png', help='PNG to write')
    show.add_argument('--batch-size', type=positive_int, default=4)
    show.add_argument('--num-shards', type=positive_int, default=2)
    show.set_defaults(run=_show)

    _add_wds_parser(commands)
    return parser


def main(argv=None):
    """Run the command; returns its exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ['bench']:
        from . import benchmark
        return benchmark.main(argv[1:])
    args = build_parser().parse_args(argv)
    if args.command == 'wds':  # bad datasets are reported, not tracebacks
        try:
            return args.run(args)
        except (ValueError, TypeError, OSError, ImportError) as err:
            print('gluonbatch wds %s: error: %s' % (args.wds_command, err), file=sys.stderr)
            return 1
    return args.run(args)


if __name__ == '__main__':
    sys.exit(main())
