"""``gluonbatch wds``: index, inspect, verify, reshard, embed, score and filter sharded
image-text datasets (the curation steps are in :mod:`gluonbatch.cli.curate`), and convert
Pascal VOC and MS COCO into detection shards (:mod:`gluonbatch.cli.convert`).

The datasets are directories of ``NNNNN.tar`` + ``.parquet`` + ``.idx`` files
(:mod:`gluonbatch.shards`). Bad datasets are reported on one line, not as tracebacks:
:func:`run` turns the errors of an action into exit code 1, and an option value the action
finds wrong (:class:`~gluonbatch.cli.usage.UsageError`) into exit code 2.
"""
import argparse
import os
import sys
import time

from .._core.argtypes import non_negative_int, positive_int
from .._core.console import is_terminal, stage_line
from .._core.wording import plural
from . import convert
from .curate import add_actions, dask_options, write_kept
from .usage import SubParsers, UsageError, reported

__all__ = ['add_parser', 'run']


def _index(args):
    from ..shards import write_index

    if args.output is not None and len(args.tar) > 1:
        raise UsageError('--output names one index file; %d tar files were given'
                         % len(args.tar))
    for tar in args.tar:
        path = write_index(tar, args.output)
        with open(path, encoding='utf-8') as handle:
            samples = int(handle.readline().split()[1])
        print('%s: %s' % (path, plural(samples, 'sample')))
    return 0


def _shorten(text, width):
    """``text`` on one line, cut to ``width`` characters.

    >>> _shorten('a  long\\ncaption', 10)
    'a long ...'
    """
    text = ' '.join(str(text).split())
    return text if len(text) <= width else text[:width - 3] + '...'


def _inspect(args):
    from ..curation import ImageTextPairDataset

    ds = ImageTextPairDataset.from_webdataset(args.dir, args.id_col)
    indexed = sum(os.path.exists(tar[:-len('.tar')] + '.idx') for tar in ds.tar_files)
    tar_bytes = sum(os.path.getsize(tar) for tar in ds.tar_files)
    print('%s: %s (%d with .idx), %s, %.1f MB of tar'
          % (ds.path, plural(len(ds.tar_files), 'shard'), indexed, plural(len(ds), 'record'),
             tar_bytes / 1e6))
    print('columns: %s' % ', '.join('%s (%s)' % (name, dtype)
                                    for name, dtype in ds.metadata.dtypes.items()))
    _detection_line(ds.path)
    failed = 0
    shown = min(args.records, len(ds))
    if shown:
        print('first %s:' % plural(shown, 'record'))
    for i in range(shown):
        key = 'record %d' % i
        try:
            key = ds.record_id(i)
            image, caption, meta = ds[i]
        except ValueError as err:
            failed += 1
            print('  %s  error: %s' % (key, err))
            continue
        print('  %s  image %s  caption %r  json keys %s'
              % (key, 'x'.join(map(str, image.shape)), _shorten(caption, 60),
                 _shorten(sorted(meta), 60)))
    return 1 if failed else 0


def _detection_line(path):
    """A line on a detection dataset's manifest, if ``path`` holds one."""
    from ..shards.manifest import MANIFEST

    if os.path.isfile(os.path.join(path, MANIFEST)):
        from ..detection.annotations import read_manifest

        manifest = read_manifest(path)
        print('detection: %s, %s%s (%s)' % (
            manifest['source'], plural(len(manifest['classes']), 'class', 'classes'),
            ' with polygons' if manifest['segmentation'] else '', MANIFEST))


def _verify(args):
    from ..shards.manifest import MANIFEST

    bar = not args.no_progress and is_terminal(sys.stderr)
    started = time.perf_counter()
    if os.path.isfile(os.path.join(args.dir, MANIFEST)):  # a detection dataset
        from ..detection import verify as verify_detection

        if args.id_col != 'key':
            raise UsageError('--id-col: a detection dataset\'s id column is key, not %r'
                             % args.id_col)
        report = verify_detection(args.dir, decode=args.decode, progress=bar)
    else:
        from ..shards import verify

        report = verify(args.dir, args.id_col, decode=args.decode, progress=bar)
    if not args.no_progress and not bar:  # off a terminal, the stage's line
        print(stage_line('verify', report.shards, report.shards,
                         time.perf_counter() - started, 'shard'), file=sys.stderr)
    checked = '%s, %s, %.1f MB of tar' % (plural(report.shards, 'shard'),
                                          plural(report.records, 'record'),
                                          report.tar_bytes / 1e6)
    for problem in report:
        print(problem)
    if report:
        print('%s: %s in %s' % (args.dir, plural(len(report), 'problem'), checked))
        return 1
    print('%s: %s: no problems%s' % (args.dir, checked, ' (images decoded)' if args.decode
                                      else ''))
    return 0


def _reshard(args):
    from ..curation import ImageTextPairDataset

    ds = ImageTextPairDataset.from_webdataset(args.src, args.id_col)
    return write_kept(ds, args, args.filter_column)


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """Add the ``wds`` command and its actions to the ``commands`` sub-parsers.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog='gluonbatch')
    >>> wds = add_parser(parser.add_subparsers())
    >>> wds.parse_args(['inspect', 'data', '--records', '0']).records
    0
    """
    wds = commands.add_parser('wds', help='sharded image-text datasets (NNNNN.tar + '
                                          '.parquet + .idx): index, inspect, verify, '
                                          'reshard, embed, score, filter; VOC and COCO '
                                          'into detection shards')
    actions = wds.add_subparsers(dest='wds_command', required=True, metavar='ACTION')

    index = actions.add_parser('index', help='write the v1.2 .idx file of tar files')
    index.add_argument('tar', nargs='+', help='tar file(s)')
    index.add_argument('--output', '-o', metavar='IDX',
                       help='index file to write (one tar only; default: beside the tar)')
    index.set_defaults(run=run, action=_index)

    inspect = actions.add_parser('inspect', help='shards, records, columns and the first '
                                                 'records of a dataset directory')
    inspect.add_argument('dir', help='dataset directory')
    inspect.add_argument('--id-col', default='key', help='id column')
    inspect.add_argument('--records', type=non_negative_int, default=3, metavar='N',
                         help='decode and show the first N records')
    inspect.set_defaults(run=run, action=_inspect)

    check = actions.add_parser('verify', help='check every shard: tar, index, parquet, '
                                              'members and ids, and a detection dataset\'s '
                                              'detection.json and annotations (exit 1 on '
                                              'any problem)')
    check.add_argument('dir', help='dataset directory')
    check.add_argument('--id-col', default='key', help='id column')
    check.add_argument('--decode', action='store_true',
                       help='also decode every image (much slower)')
    check.add_argument('--no-progress', action='store_true',
                       help='no progress (a bar on a terminal, else a line when done)')
    check.set_defaults(run=run, action=_verify)

    reshard = actions.add_parser('reshard', help='write the records whose filter column is '
                                                 'True as a new, renumbered dataset')
    reshard.add_argument('src', help='source dataset directory')
    reshard.add_argument('dst', help='destination directory (not the source)')
    reshard.add_argument('--filter-column', metavar='COL',
                         help='bool parquet column: keep records where it is True '
                              '(default: keep every record)')
    _reshard_options(reshard)
    dask_options(reshard)
    reshard.set_defaults(run=run, action=_reshard)
    add_actions(actions, run, _reshard_options)
    convert.add_actions(actions, run)
    return wds


def _reshard_options(parser):
    parser.add_argument('--samples-per-shard', type=positive_int, default=10000, metavar='N',
                        help='records per new shard')
    parser.add_argument('--max-shards', type=positive_int, default=5, metavar='N',
                        help='digits of the shard number')
    parser.add_argument('--old-id-col', metavar='NAME',
                        help='keep the previous ids in this new column')


def run(args: argparse.Namespace) -> int:
    """Run the chosen action; the errors of the data are printed on one line and give exit
    code 1 (2 for a :class:`~gluonbatch.cli.usage.UsageError`): :func:`~.usage.reported`."""
    return reported(args, args.action)
