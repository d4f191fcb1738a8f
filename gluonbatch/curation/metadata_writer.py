"""Writing the metadata of a dataset's shards from a Dask DataFrame: one parquet per shard,
one Dask task per shard on whatever scheduler is active, each partition's rows checked
against the shard it describes, all files replaced in one journaled commit
(:mod:`~gluonbatch.shards.commit`). Resharding (``to_webdataset``) is
:mod:`~gluonbatch.curation.reshard`."""
import collections
import contextlib
import contextvars
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import dask
import dask.dataframe as dd
import dask.threaded
from dask.core import keys_in_tasks
from dask.delayed import Delayed
from dask.highlevelgraph import HighLevelGraph
from dask.optimization import cull, inline
from dask.utils import ensure_dict
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .._core.console import stage_named
from .._core.typing import PathLike
from .._core.wording import plural
from ..shards.commit import FORWARD, staging
from ..shards.files import Shard
from ..shards.parquet import merge_columns
from .metadata import pandas_dtypes
from .progress import wait_with_progress

__all__ = ['write_parquet', 'arrow_table', 'check_rows', 'cluster_progress', 'compute',
           'partitions', 'partition_tasks', 'save_metadata']


def write_parquet(frame: pd.DataFrame | pa.Table, path: PathLike) -> None:
    """Write ``frame`` (a pandas DataFrame, or a pyarrow Table written as it is) to ``path``
    without its index; a column of equal-length 1-d float arrays (embeddings) is stored as
    a fixed-size list of float32 (:func:`arrow_table`).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, 'x.parquet')
    ...     write_parquet(pd.DataFrame({'e': [np.ones(3), np.zeros(3)]}), path)
    ...     print(pq.read_schema(path).field('e').type)
    fixed_size_list<element: float>[3]
    """
    pq.write_table(frame if isinstance(frame, pa.Table) else arrow_table(frame), path)


def arrow_table(frame: pd.DataFrame) -> pa.Table:
    """``frame`` (a pandas DataFrame) as the pyarrow Table gluonbatch writes, without its
    index: a column of equal-length 1-d float arrays (embeddings) becomes a fixed-size list
    of float32.

    >>> table = arrow_table(pd.DataFrame({'e': [np.ones(2)], 'n': [1]}))
    >>> [str(kind) for kind in table.schema.types]
    ['fixed_size_list<item: float>[2]', 'int64']
    """
    # one thread: a shard's rows convert faster than a pool of threads starts
    table = pa.Table.from_pandas(frame, preserve_index=False, nthreads=1)
    for name in frame.columns:
        values = frame[name]
        if values.dtype != object or not len(values):
            continue
        if all(isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind == 'f'
               for v in values) and len({len(v) for v in values}) == 1:
            flat = pa.array(np.concatenate(values.tolist()).astype(np.float32))
            table = table.set_column(table.schema.get_field_index(name), name,
                                     pa.FixedSizeListArray.from_arrays(flat, len(values.iloc[0])))
    return table


def check_rows(frame: pd.DataFrame, shard: Shard, id_col: str,
               ids: np.ndarray | None = None) -> None:
    """Raise unless ``frame`` (a computed partition of the metadata) still has ``shard``'s
    rows: the same number, indexed by their record numbers, ids in record order (sorted),
    and equal to ``ids`` (the shard's record ids) when given."""
    problem = None
    if len(frame) != shard.stop - shard.start or not frame.index.equals(
            pd.RangeIndex(shard.start, shard.stop)):
        problem = '%s (index %s..); it had %d (%d..%d)' % (
            plural(len(frame), 'row'), frame.index[:1].tolist(), shard.stop - shard.start, shard.start,
            shard.stop - 1)
    elif id_col in frame.columns and not frame[id_col].is_monotonic_increasing:
        problem = 'its ids out of record order'
    elif ids is not None and frame[id_col].tolist() != ids.tolist():
        problem = 'ids that are not its records\' ids'
    if problem:
        raise ValueError('the metadata of %s has %s when the dataset was opened: rows were '
                         'added, removed or reordered, or ids changed; add columns, but keep '
                         'the rows' % (shard.parquet, problem))


# The label of the writers' progress on a distributed client (None: no progress shown)
_CLUSTER_PROGRESS: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    'gluonbatch_cluster_progress', default=None)


@contextlib.contextmanager
def cluster_progress(label: str = 'computing') -> Iterator[None]:
    """Within this context, the writers' computations on a ``distributed`` client show
    the progress of their tasks (one per shard): ``distributed``'s bar on a terminal, else
    one line per computation labelled ``label``
    (:func:`~gluonbatch.curation.progress.wait_with_progress`)."""
    token = _CLUSTER_PROGRESS.set(label)
    try:
        yield
    finally:
        _CLUSTER_PROGRESS.reset(token)


def compute(tasks: Iterable[Delayed], what: str | None = None,
            holds_the_gil: bool = False) -> tuple[Any, ...]:
    """The results of ``tasks`` (Dask ``Delayed`` objects) computed on the active scheduler,
    as a tuple; the one place the writers compute. ``what`` names the stage in progress
    lines (``'writing shards'``), where a command has several.

    Tasks that hold the GIL throughout (``holds_the_gil``: pure Python, such as writing
    tar records) run one at a time where the active scheduler is Dask's local threads:
    threads would only take turns at the GIL, and switching costs time (resharding 100,000
    records took 28 s on 2 threads, 21.5 s on one).
    """
    scheduler = dask.base.get_scheduler()
    client: Any = getattr(scheduler, '__self__', None)  # a distributed client's method?
    label = _CLUSTER_PROGRESS.get()
    with stage_named(what):
        if label is not None and hasattr(client, 'gather'):  # a distributed client
            futures = client.compute(list(tasks))
            wait_with_progress(futures, label)
            return tuple(client.gather(futures))
        # None: no scheduler configured, and Delayed objects then compute on local threads
        if holds_the_gil and scheduler in (None, dask.threaded.get):
            return dask.compute(*tasks, scheduler='synchronous')
        return dask.compute(*tasks)


def partitions(frame: dd.DataFrame) -> list[Delayed]:
    """The Dask DataFrame's partitions as one ``Delayed`` each (one per shard).

    Lowered with :func:`~gluonbatch.curation.metadata.pandas_dtypes`: on this path too,
    Dask would otherwise turn object columns that hold arrays into strings.
    """
    with pandas_dtypes():
        return frame.to_delayed()


def partition_tasks(frame: dd.DataFrame, task: Callable[[Delayed, int], Delayed]
                    ) -> list[Delayed]:
    """One Dask task per partition of ``frame`` (one per shard), from ``task(partition,
    number)``: a ``Delayed`` call that takes the partition's ``Delayed``.

    Each task computes its partition itself, inlined: one task per shard instead of two
    (read, then use), and no partition held between tasks (on a cluster, by a worker, or
    sent to another). A partition that the tasks name more than once stays a task of its
    own, computed once.

    Examples
    --------
    >>> import dask.dataframe as dd
    >>> frame = dd.from_pandas(pd.DataFrame({'x': range(6)}), npartitions=3)
    >>> tasks = partition_tasks(frame, lambda part, n: dask.delayed(len)(part))
    >>> len(tasks), dask.compute(*tasks)
    (3, (2, 2, 2))
    """
    parts = partitions(frame)
    tasks = [task(part, number) for number, part in enumerate(parts)]
    keys = [each.key for each in tasks]
    graph = ensure_dict(dask.base.collections_to_dsk(tasks, optimize_graph=True))
    part_keys = {part.key for part in parts}
    # how often the other tasks name each partition, found as Dask finds dependencies
    others = [spec for key, spec in graph.items() if key not in part_keys]
    uses = collections.Counter(keys_in_tasks(part_keys, others, as_list=True))
    graph = inline(graph, keys=[key for key in part_keys if uses[key] == 1],
                   inline_constants=False)
    graph, _ = cull(graph, keys)
    # one named layer that all tasks share: computing them merges it once, where plain
    # dicts would be merged once per task (and a culled copy per task would repeat what
    # every partition needs, a quantile say, n times)
    layer = 'partition-tasks-' + dask.base.tokenize(*keys)
    layered = HighLevelGraph({layer: graph}, {layer: set()})
    return [Delayed(key, layered, layer=layer) for key in keys]


def _rows_checked(frame, opened_ids, shards, id_col, partition_info=None):
    """One partition, checked against the ids its shard was opened with (``opened_ids``,
    the same partition of the opened metadata's id column): rewritten ids would no longer
    name the shard's records."""
    shard = shards[partition_info['number']]
    check_rows(frame, shard, id_col, opened_ids.to_numpy(dtype=str))
    return frame


def save_metadata(frame: dd.DataFrame, opened_ids: dd.Series, id_col: str,
                  shards: Sequence[Shard], directory: PathLike,
                  columns: str | Sequence[str] | None = None, merge: bool = False) -> list[str]:
    """Write ``frame`` (the dataset's Dask metadata) as one parquet per shard, one task per
    shard; the work of :meth:`.ImageTextPairDataset.save_metadata` (which documents the
    arguments). ``opened_ids`` is the id column of the metadata as opened: each
    partition's ids must still be those (a frame built from the opened one reads each
    parquet once for both). With ``merge`` (and ``columns``), each task puts ``columns``
    into its shard's own parquet (:func:`~gluonbatch.shards.parquet.merge_columns`)
    and keeps the file's other columns as they are. The files are written into a hidden
    directory and, once every shard is written, renamed over the old ones in one journaled
    commit: a failure changes no file, and a kill during the renames is finished by the
    next read or write of the directory (:mod:`~gluonbatch.shards.commit`).
    """
    if columns is not None:
        columns = [columns] if isinstance(columns, str) else list(columns)
        unknown = [c for c in columns if c not in frame.columns]
        if unknown:
            raise ValueError('save_metadata: no %s %s in the metadata; it has %s'
                             % ('column' if len(unknown) == 1 else 'columns', unknown,
                                list(map(str, frame.columns))))
        if id_col not in columns:
            columns.insert(0, id_col)
        frame = frame[columns]
    frame = frame.map_partitions(_rows_checked, opened_ids, shards, id_col,
                                 align_dataframes=False, meta=frame._meta)
    directory = os.path.abspath(os.fspath(directory))
    os.makedirs(directory, exist_ok=True)
    names = [shard.stem + '.parquet' for shard in shards]
    write = _write_merged if merge and columns is not None else _write_whole
    with staging(directory) as stage:
        compute(partition_tasks(frame, lambda part, number: dask.delayed(write)(
            part, shards[number], id_col, stage.file(names[number]))))
        # every shard is written: they replace the old files together
        stage.commit([(name, name) for name in names], FORWARD)
    return [os.path.join(directory, name) for name in names]


def _write_whole(part, shard, id_col, path):
    write_parquet(part, path)


def _write_merged(part, shard, id_col, path):
    """``part``'s columns put into ``shard``'s own parquet, written to ``path``."""
    write_parquet(merge_columns(shard.parquet, arrow_table(part), id_col), path)
