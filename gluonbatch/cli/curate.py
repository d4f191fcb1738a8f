"""``gluonbatch wds embed / score / filter``: curation steps on a dataset directory, computed
by Dask (local threads, or the scheduler at ``--scheduler ADDRESS``), with a progress bar on
a terminal and a line per computation elsewhere.

``embed`` and ``score`` add a column to the dataset's parquet files (written back in place,
once every shard is computed); ``filter`` writes the records an expression keeps as a new dataset.
"""
import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from .._core.argtypes import non_negative_int, positive_int
from .._core.wording import plural
from .usage import Runner, SubParsers, UsageError

__all__ = ['add_actions', 'dask_options', 'computing_on', 'write_kept', 'has',
           'WHERE_FUNCTIONS']


@contextlib.contextmanager
def computing_on(args: argparse.Namespace) -> Iterator[None]:
    """Dask computes on ``args.scheduler`` (a ``distributed`` scheduler address) if given,
    else on local threads; with progress unless ``--no-progress``: a bar on a terminal, else
    a line per computation labelled with the action."""
    if args.scheduler:
        from distributed import Client
        from ..curation.metadata_writer import cluster_progress

        with Client(args.scheduler) as client:
            print('computing on %s (dashboard: %s)' % (args.scheduler, client.dashboard_link),
                  file=sys.stderr)  # stdout keeps the results
            with cluster_progress(args.wds_command) if args.progress else \
                    contextlib.nullcontext():
                yield
    elif args.progress:
        from ..curation.progress import local_progress

        with local_progress(args.wds_command):
            yield
    else:
        yield


def _embedder(args):
    from ..curation import ExportedImageEmbedder, GluonImageEmbedder

    options = dict(image_size=args.image_size, batch_size=args.batch_size,
                   num_workers=args.num_workers, normalize_embeddings=args.normalize,
                   embedding_column=args.column)
    if args.model:
        return ExportedImageEmbedder(args.model, args.epoch, **options)
    return GluonImageEmbedder(_zoo_features(args), **options)


def _zoo_features(args):
    from gluoncv.model_zoo import get_model  # the examples' extra

    net = get_model(args.network, pretrained=False)
    if args.params:
        net.load_parameters(args.params)
    else:
        net.initialize()
    return getattr(net, 'features', net)


def _open(args):
    from ..curation import ImageTextPairDataset

    return ImageTextPairDataset.from_webdataset(args.dir, args.id_col)


def _save_column(ds, args):
    """Compute the dataset's new column ``args.column`` and write it into its parquets."""
    with computing_on(args):
        written = ds.save_metadata(columns=[args.column])  # the files keep their others
    print('%s: %s for %s in %s' % (ds.path, args.column, plural(len(ds), 'record'),
                                   plural(len(written), 'parquet file')))
    return 0


def _embed(args):
    return _save_column(_embedder(args)(_open(args)), args)


def _score(args):
    from ..curation import ExportedEmbeddingClassifier

    return _save_column(ExportedEmbeddingClassifier(
        args.model, args.column, args.epoch, embedding_column=args.embedding_column,
        batch_size=args.batch_size)(_open(args)), args)


def has(values: Any, name: str) -> Any:
    """``--where``'s ``@has(column, name)``: True where a list column's list holds
    ``name`` (a detection dataset's ``classes``: the images with a person, say).

    >>> import pandas as pd
    >>> has(pd.Series([['dog'], ['person', 'dog'], []]), 'person').tolist()
    [False, True, False]
    """
    return values.map(lambda listed: listed is not None and name in list(listed)).astype(bool)


#: What ``--where`` may name besides the columns, with ``@``.
WHERE_FUNCTIONS = {'has': has}


def _evaluated(part, where):
    """``where`` evaluated on ``part``, one partition of the metadata (pandas)."""
    return part.eval(where, local_dict=WHERE_FUNCTIONS)


def _filter(args):
    from ..curation import ImageTextPairDataset

    ds = ImageTextPairDataset.from_webdataset(args.src, args.id_col)
    frame = ds.metadata
    try:  # on the first shard's rows: a wrong expression is told before any work
        first = _evaluated(frame.partitions[0].compute(), args.where)
    except (NameError, SyntaxError, KeyError, TypeError, ValueError, AttributeError) as err:
        raise UsageError('--where %r is not an expression of the columns %s: %s'
                         % (args.where, list(map(str, frame.columns)), err)) from None
    _check_condition(args.where, first)
    frame[args.keep_column] = frame.map_partitions(_evaluated, args.where,
                                                   meta=(args.keep_column, first.dtype))
    return write_kept(ds, args, args.keep_column, args.where)


def _check_condition(where, kept):
    """``kept``, what ``--where`` gave, must be True or False per record.

    >>> import pandas as pd
    >>> _check_condition('width', pd.Series([3, 4]))
    Traceback (most recent call last):
    ...
    gluonbatch.cli.usage.UsageError: --where 'width' is not a condition: it gives int64 values, \
not True or False; write a condition such as 'width >= 256'
    """
    import numpy as np
    import pandas as pd

    dtype = kept.dtype if hasattr(kept, 'dtype') else np.asarray(kept).dtype
    if pd.api.types.is_bool_dtype(dtype):
        return
    number = pd.api.types.is_numeric_dtype(dtype)
    example = (where if where.isidentifier() else '(%s)' % where) if number else 'width'
    raise UsageError('--where %r is not a condition: it gives %s values, not True or False; '
                     'write a condition such as %r' % (where, dtype, example + ' >= 256'))


def write_kept(ds: Any, args: argparse.Namespace, filter_column: str | None,
               why: str | None = None) -> int:
    """``ds.to_webdataset`` into ``args.dst`` on the scheduler of ``args``, then one line:
    how many records were kept (``why``: the reason shown beside the count). ``ds`` is an
    :class:`~gluonbatch.curation.ImageTextPairDataset` (typed ``Any``: the command line
    imports the curation package only when a command runs)."""
    from ..curation import ImageTextPairDataset

    _check_columns(ds.metadata, filter_column, args.old_id_col)
    with computing_on(args):
        tars = ds.to_webdataset(args.dst, filter_column,
                                samples_per_shard=args.samples_per_shard,
                                max_shards=args.max_shards, old_id_col=args.old_id_col)
    if not tars:
        print('no record of %s is kept (%s); nothing written' % (ds.path, why or filter_column))
        return 0
    kept = len(ImageTextPairDataset.from_webdataset(args.dst, args.id_col))
    print('%s: %d of %s%s in %s' % (args.dst, kept, plural(len(ds), 'record'),
                                    ' (%s)' % why if why else '', plural(len(tars), 'shard')))
    return 0


def _check_columns(frame, filter_column, old_id_col):
    """The options naming columns of the metadata ``frame`` must name them as the write
    needs: a wrong one is a command line the command cannot run (exit 2)."""
    import pandas as pd

    columns = list(map(str, frame.columns))
    if filter_column is not None and filter_column not in columns:
        raise UsageError('--filter-column %r is not a column of the metadata; it has %s'
                         % (filter_column, columns))
    if filter_column is not None and not pd.api.types.is_bool_dtype(frame[filter_column].dtype):
        raise UsageError('--filter-column %r must be a column of True or False (True keeps a '
                         'record); it holds %s' % (filter_column, frame[filter_column].dtype))
    if old_id_col is not None and old_id_col in columns:
        raise UsageError('--old-id-col %r is already a column of the metadata; choose a new '
                         'name' % old_id_col)


def dask_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument('--id-col', default='key', help='id column')
    parser.add_argument('--scheduler', metavar='ADDRESS',
                        help='compute on this Dask scheduler (e.g. tcp://host:8786); '
                             'default: local threads')
    parser.add_argument('--no-progress', dest='progress', action='store_false',
                        help='no progress (a bar on a terminal, else a line per stage)')


def add_actions(actions: SubParsers, run: Runner,
                reshard_options: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add ``embed``, ``score`` and ``filter`` to the ``wds`` actions.

    ``reshard_options(parser)`` adds the options ``filter`` shares with ``reshard``.
    """
    embed = actions.add_parser('embed', help='add an image embedding column (a Gluon '
                                             'network run on every image)')
    embed.add_argument('dir', help='dataset directory (its parquet files gain the column)')
    source = embed.add_mutually_exclusive_group(required=True)
    source.add_argument('--model', metavar='PREFIX',
                        help='a network exported with HybridBlock.export(PREFIX)')
    source.add_argument('--network', metavar='NAME',
                        help="a gluoncv model-zoo network, e.g. resnet18_v1b (its "
                             "features); weights from --params, else random")
    embed.add_argument('--params', metavar='FILE', help='parameters for --network')
    embed.add_argument('--epoch', type=non_negative_int, default=0,
                       help='epoch number of the --model files')
    embed.add_argument('--image-size', type=positive_int, default=224, metavar='S',
                       help='images are resized to S x S')
    embed.add_argument('--batch-size', type=positive_int, default=64, metavar='N',
                       help='images per forward pass')
    embed.add_argument('--num-workers', type=non_negative_int, default=0, metavar='N',
                       help='DataLoader worker threads per shard')
    embed.add_argument('--column', default='image_embedding', help='column to write')
    embed.add_argument('--no-normalize', dest='normalize', action='store_false',
                       help='keep the embeddings unnormalised (default: unit L2 norm)')
    dask_options(embed)
    embed.set_defaults(run=run, action=_embed)

    score = actions.add_parser('score', help='add a score column: a Gluon head on the '
                                             'image embeddings')
    score.add_argument('dir', help='dataset directory (its parquet files gain the column)')
    score.add_argument('--model', metavar='PREFIX', required=True,
                       help='the head, exported with HybridBlock.export(PREFIX)')
    score.add_argument('--epoch', type=non_negative_int, default=0,
                       help='epoch number of the --model files')
    score.add_argument('--column', required=True, help='column to write, e.g. '
                                                       'aesthetic_score')
    score.add_argument('--embedding-column', default='image_embedding',
                       help='column of the image embeddings the head reads')
    score.add_argument('--batch-size', type=positive_int, default=4096, metavar='N',
                       help='embeddings per forward pass')
    dask_options(score)
    score.set_defaults(run=run, action=_score)

    filtered = actions.add_parser('filter', help='write the records an expression keeps as '
                                                 'a new, renumbered dataset')
    filtered.add_argument('src', help='source dataset directory')
    filtered.add_argument('dst', help='destination directory (not the source)')
    filtered.add_argument('--where', required=True, metavar='EXPR',
                          help="a DataFrame.eval expression of the metadata columns, e.g. "
                               "'aesthetic_score > 5 and width >= 256', or on detection "
                               "data \"num_objects >= 3 and @has(classes, 'person')\"")
    filtered.add_argument('--keep-column', default='keep',
                          help='the column the expression is written to')
    reshard_options(filtered)
    dask_options(filtered)
    filtered.set_defaults(run=run, action=_filter)
