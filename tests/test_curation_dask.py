"""The lazy metadata on Dask: nothing is read until something computes, each shard once;
results equal a plain pandas computation on the threaded scheduler and on a local
``distributed`` cluster, which also survives a worker killed while resharding."""
import builtins
import contextlib
import os
import socket
import warnings

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from gluonbatch.curation import ImageTextPairDataset
from gluonbatch.curation.metadata_writer import partition_tasks
from helpers import ID, files, local_cluster, make_dataset, visible

SIZES = (4, 3, 5, 2)


@pytest.fixture(scope='module')
def source(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('source'))
    return path, make_dataset(path, sizes=SIZES)


def _pandas_metadata(path):
    """The metadata the slow way: every parquet read whole, rows sorted by id per shard."""
    frames = [pd.read_parquet(os.path.join(path, name)).sort_values(ID)
              for name in sorted(os.listdir(path)) if name.endswith('.parquet')]
    return pd.concat(frames, ignore_index=True)


def _plain(frame):
    """``frame`` with Dask's string columns as plain objects, for comparing with pandas."""
    return frame.astype({name: object for name, dtype in frame.dtypes.items()
                         if isinstance(dtype, pd.StringDtype)})


@pytest.fixture
def parquet_reads(monkeypatch, source):
    """``(opened, reads)``: the files of ``source`` opened from now on (parquets through
    pyarrow, tars and indexes through Python), in order, and the ``columns`` of each of its
    parquets read (None: every column).

    Only ``source``'s files count: a computation of an earlier test that failed may still
    be running on Dask's threads, reading the files of its own directory.
    """
    root = source[0] + os.sep
    opened, reads = [], []
    parquet_file, python_open = pq.ParquetFile, builtins.open

    class RecordingParquetFile(parquet_file):
        def __init__(self, path, *args, **kwargs):
            self.recorded = os.fspath(path).startswith(root)
            if self.recorded:
                opened.append(os.fspath(path))
            super().__init__(path, *args, **kwargs)

        def read(self, columns=None, *args, **kwargs):
            if self.recorded:
                reads.append(None if columns is None else sorted(columns))
            return super().read(columns, *args, **kwargs)

    def recording_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.fspath(file).startswith(root) and \
                os.fspath(file).endswith(('.tar', '.idx')):
            opened.append(os.fspath(file))
        return python_open(file, *args, **kwargs)

    monkeypatch.setattr(pq, 'ParquetFile', RecordingParquetFile)
    monkeypatch.setattr(builtins, 'open', recording_open)
    return opened, reads


@pytest.fixture
def opened(parquet_reads):
    return parquet_reads[0]


@pytest.fixture
def columns_read(parquet_reads):
    return parquet_reads[1]


def test_a_computation_reads_only_the_columns_it_needs(source, columns_read):
    path, _ = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds.metadata['wide'] = ds.metadata['width'] > 10
    want = _pandas_metadata(path)
    assert ds.metadata['wide'].sum().compute() == (want['width'] > 10).sum()
    assert columns_read == [sorted([ID, 'width'])] * len(SIZES)  # the id sorts the rows
    del columns_read[:]
    whole = ds.metadata.compute()
    assert columns_read == [None] * len(SIZES)
    pd.testing.assert_frame_equal(_plain(whole).drop(columns='wide'), want)


@pytest.mark.parametrize('compute', [lambda frame: frame.compute(),
                                     lambda frame: frame['width'].sum().compute()],
                         ids=['every-column', 'one-column'])
def test_a_shard_with_other_columns_is_refused_naming_it(tmp_path, compute):
    make_dataset(str(tmp_path), sizes=SIZES)
    odd = str(tmp_path / '00002.parquet')
    frame = pd.read_parquet(odd)
    frame['extra'] = 1
    frame.to_parquet(odd, index=False)
    ds = ImageTextPairDataset.from_webdataset(tmp_path, ID)
    with pytest.raises(ValueError, match=r"00002.parquet has columns \[.*'extra'\]; the "
                                         r"dataset's first shard has"):
        compute(ds.metadata)


def test_building_a_pipeline_reads_nothing_and_computing_reads_each_shard_once(
        source, tmp_path, opened):
    path, _ = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    footers = sorted(opened)
    assert footers == sorted(os.path.join(path, '%05d.parquet' % k) for k in range(4))
    del opened[:]
    ds.metadata['wide'] = ds.metadata['width'] > 10
    ds.metadata['area'] = ds.metadata['width'] * ds.metadata['height']
    ds.metadata['doubled'] = ds.metadata.map_partitions(lambda frame: frame['score'] * 2,
                                                        meta=('doubled', 'f8'))
    assert ds.metadata.npartitions == 4 and ds.metadata.known_divisions
    assert opened == []  # nothing read by building the pipeline
    written = ds.save_metadata(tmp_path / 'saved', columns=['wide', 'area', 'doubled'])
    assert sorted(opened) == footers  # each shard's parquet read once, no tar
    want = _pandas_metadata(path)
    saved = pd.concat([pd.read_parquet(p) for p in written], ignore_index=True)
    np.testing.assert_array_equal(saved['wide'], want['width'] > 10)
    np.testing.assert_array_equal(saved['area'], want['width'] * want['height'])
    np.testing.assert_array_equal(saved['doubled'], want['score'] * 2)


def _numbered(part, number, shared):
    return number, part.index.tolist(), part['wide'].tolist(), shared


def _one_shared_graph(tasks):
    """The graph of ``tasks``, which they must share as one named layer: computing them
    then merges it once (plain dicts, or a copy per task, are merged once per task)."""
    graph = tasks[0].dask
    assert all(each.dask is graph for each in tasks) and len(graph.layers) == 1
    return graph


def test_partition_tasks_compute_each_partition_inside_its_task(source):
    """One task per shard (the shard's read and the pipeline inlined into the task that
    uses it), a Delayed shared by all of them kept once, and the results of computing the
    partitions on their own."""
    path, _ = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds.metadata['wide'] = ds.metadata['width'] > 10
    shared = dask.delayed(['shared'], traverse=False)
    tasks = partition_tasks(ds.metadata, lambda part, number: dask.delayed(_numbered)(
        part, number, shared))
    assert len(tasks) == 4
    graph = _one_shared_graph(tasks)
    assert len(graph) == 4 + 1
    assert sum(1 for key in graph if str(key).startswith('list')) == 1
    want = _pandas_metadata(path)
    want_wide = (want['width'] > 10).tolist()
    results = dask.compute(*tasks, scheduler='threads')
    starts = np.cumsum((0,) + SIZES)
    assert results == tuple((n, list(range(starts[n], starts[n + 1])),
                             want_wide[starts[n]:starts[n + 1]], ['shared'])
                            for n in range(4))


def test_partition_tasks_keep_what_a_partition_depends_on(source):
    """A frame built from two collections: each partition's inputs stay tasks of their own
    where Dask keeps them apart, and every task still gets its own partition."""
    path, _ = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    other = dd.from_pandas(pd.DataFrame({'bonus': np.arange(sum(SIZES))}),
                           npartitions=1).repartition(divisions=ds.metadata.divisions)
    frame = ds.metadata.assign(wide=ds.metadata['width'] + other['bonus'] > 10)
    tasks = partition_tasks(frame, lambda part, number: dask.delayed(_numbered)(
        part, number, None))
    want = _pandas_metadata(path)
    wide = (want['width'] + np.arange(sum(SIZES)) > 10).tolist()
    starts = np.cumsum((0,) + SIZES)
    assert dask.compute(*tasks, scheduler='sync') == tuple(
        (n, list(range(starts[n], starts[n + 1])), wide[starts[n]:starts[n + 1]], None)
        for n in range(4))


def test_partition_tasks_compute_a_partition_named_twice_once():
    """A task that names its partition twice (here through a second Delayed) does not
    compute it twice: that partition stays a task of its own."""
    computed = []

    def counted(frame):
        computed.append(len(frame))
        return frame

    frame = dd.from_pandas(pd.DataFrame({'x': range(6)}), npartitions=3).map_partitions(
        counted, meta={'x': 'i8'})
    tasks = partition_tasks(frame, lambda part, number: dask.delayed(
        lambda rows, length: len(rows) + length)(part, dask.delayed(len)(part)))
    assert dask.compute(*tasks, scheduler='sync') == (4, 4, 4)
    assert computed == [2, 2, 2]


def test_partition_tasks_of_a_frame_whose_graph_holds_arrays_and_dicts(source):
    """A column compared with a quantile: Dask's tasks carry arrays and dicts as arguments,
    which are no keys and are passed through as they are; the quantile, which every
    partition needs, is in the tasks' one shared graph once."""
    path, _ = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    median = ds.metadata['width'].quantile(0.5)
    frame = ds.metadata.assign(wide=ds.metadata['width'] > median)
    tasks = partition_tasks(frame, lambda part, number: dask.delayed(_numbered)(
        part, number, {'options': np.arange(2)}))
    _one_shared_graph(tasks)
    want = _pandas_metadata(path)
    wide = (want['width'] > median.compute()).tolist()
    starts = np.cumsum((0,) + SIZES)
    results = dask.compute(*tasks, scheduler='sync')
    assert [result[:3] for result in results] == [
        (n, list(range(starts[n], starts[n + 1])), wide[starts[n]:starts[n + 1]])
        for n in range(4)]
    assert all(result[3]['options'].tolist() == [0, 1] for result in results)


def test_random_access_reads_only_the_shard_of_the_record(source, opened):
    path, records = source
    for name in os.listdir(path):  # new files to this process: what earlier tests read of
        os.utime(os.path.join(path, name))  # them (and it keeps) is read again
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    del opened[:]
    assert ds.record_id(9) == records[9]['key'] and ds.read_raw(9)['jpg'] == records[9]['jpg']
    assert sorted(set(opened)) == [os.path.join(path, '00002.parquet'),
                                   os.path.join(path, '00002.tar')]


def _pipeline(ds):
    """A curation pipeline: a derived score, a filter column, kept per shard."""
    frame = ds.metadata
    frame['area'] = frame['width'] * frame['height']
    frame['keep'] = (frame['area'] > 120) & (frame['score'] < 0.4)
    return frame


def _expected(path):
    frame = _pandas_metadata(path)
    frame['area'] = frame['width'] * frame['height']
    frame['keep'] = (frame['area'] > 120) & (frame['score'] < 0.4)
    return frame


def _check_pipeline_and_reshard(path, out):
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    frame = _pipeline(ds)
    want = _expected(path)
    pd.testing.assert_frame_equal(_plain(frame.compute()), want, check_dtype=False)
    kept = frame[frame['keep']].compute()
    assert kept[ID].tolist() == want[ID][want['keep']].tolist()
    assert frame.groupby('shard')['area'].sum().compute().sort_index().tolist() == \
        want.groupby('shard')['area'].sum().tolist()
    written = ds.to_webdataset(out, 'keep', samples_per_shard=3, old_id_col='old')
    new = ImageTextPairDataset.from_webdataset(out, ID)
    assert new.metadata['old'].compute().tolist() == want[ID][want['keep']].tolist()
    assert [new[i][2]['old'] for i in range(len(new))] == want[ID][want['keep']].tolist()
    return written


def test_the_threaded_scheduler_computes_what_pandas_does(source, tmp_path):
    path, _ = source
    written = _check_pipeline_and_reshard(path, tmp_path / 'out')  # threads: Dask's default
    assert len(written) == -(-int(_expected(path)['keep'].sum()) // 3)


def fail_on(frame, shard):
    """A column whose computation fails for one shard."""
    if int(frame['shard'].iloc[0]) == shard:
        raise OSError('shard %d is unreadable' % shard)
    return frame['score']


def test_a_failed_run_leaves_no_shard_and_runs_again(source, tmp_path):
    """A task failing while the output shards are written: the error arrives as raised,
    no shard (and no temporary file) is left, and a run into the same directory works."""
    path, _ = source
    out = tmp_path / 'out'

    def resharded(failing_shard):
        ds = ImageTextPairDataset.from_webdataset(path, ID)
        frame = _pipeline(ds)
        frame['copy'] = frame.map_partitions(fail_on, failing_shard, meta=('copy', 'f8'))
        return ds.to_webdataset(out, 'keep', samples_per_shard=2)

    with dask.config.set(scheduler='threads'), \
            pytest.raises(OSError, match='shard 2 is unreadable'):
        resharded(2)
    # nothing visible (the directory the run made is removed when it can be: a task still
    # running may leave a hidden file, which the next run removes)
    assert not out.exists() or visible(out) == []
    with dask.config.set(scheduler='threads'):
        written = resharded(None)
    assert len(written) == len(files(out)) // 3 == -(-int(_expected(path)['keep'].sum()) // 2)


@pytest.mark.filterwarnings('ignore:Running on a single-machine scheduler')
def test_a_local_cluster_computes_what_pandas_does(source, tmp_path, cluster):
    path, _ = source
    threaded = tmp_path / 'threaded'
    with dask.config.set(scheduler='threads'):
        _check_pipeline_and_reshard(path, threaded)
    with dask.config.set(scheduler=cluster[1]):
        written = _check_pipeline_and_reshard(path, tmp_path / 'cluster')
    assert [os.path.basename(p) for p in written] == files(threaded)[2::3]
    for name in files(threaded):  # the same shards, byte for byte (mtime aside)
        if not name.endswith('.tar'):
            assert (tmp_path / 'cluster' / name).read_bytes() == (threaded / name).read_bytes()


def die_once(frame, marker, shard):
    """A column that kills its worker process the first time it sees ``shard``."""
    if int(frame['shard'].iloc[0]) == shard and not os.path.exists(marker):
        open(marker, 'w').close()
        os._exit(1)  # as a killed worker: no cleanup, no exception
    return frame['score'] * 10


@contextlib.contextmanager
def _cluster_losing_a_worker():
    """A local cluster of two worker processes, of which a test kills one: its processes
    are ended first (a restarted worker may not answer a close, which would wait for it),
    then the client and the cluster are closed."""
    distributed = pytest.importorskip('distributed')
    psutil = pytest.importorskip('psutil')
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    local = local_cluster()
    client = distributed.Client(local, set_as_default=False)
    try:
        yield client
    finally:
        for child in psutil.Process().children(recursive=True):
            try:  # the nannies and workers; the process's own resource tracker stays
                if child.pid not in before and 'resource_tracker' not in ' '.join(
                        child.cmdline()):
                    child.kill()
            except psutil.NoSuchProcess:
                pass
        try:
            client.close(timeout=5)
            local.close(timeout=5)
        except (TimeoutError, OSError):
            pass  # its processes are gone already


@pytest.mark.slow  # a cluster's worker killed mid-run: the full tier
def test_a_worker_killed_while_resharding(source, tmp_path):
    """Dask runs the dead worker's task again elsewhere; the output is complete and no
    temporary file is left."""
    path, _ = source
    want = _expected(path)

    def resharded(out, marker):
        ds = ImageTextPairDataset.from_webdataset(path, ID)
        frame = _pipeline(ds)
        frame['tenfold'] = frame.map_partitions(die_once, str(marker), 2,
                                                meta=('tenfold', 'f8'))
        return ds.to_webdataset(out, 'keep', samples_per_shard=3)

    out = tmp_path / 'retried'
    with _cluster_losing_a_worker() as client, dask.config.set(scheduler=client):
        written = resharded(out, tmp_path / 'died-once')
    assert (tmp_path / 'died-once').exists()  # a worker did die
    new = ImageTextPairDataset.from_webdataset(out, ID)
    assert len(new) == int(want['keep'].sum()) and len(written) == len(files(out)) // 3
    np.testing.assert_array_equal(new.metadata['tenfold'].compute(),
                                  want['score'][want['keep']] * 10)
    assert not [name for name in os.listdir(out) if name.startswith('.')]


def test_a_cluster_of_the_tests_leaves_the_default_dashboard_port_alone():
    """The tests' clusters (``local_cluster``) bind a free port for their scheduler's HTTP
    server: with 8787 taken (by this test, standing in for another cluster), no warning
    and another port."""
    with socket.socket() as taken:
        try:
            taken.bind(('127.0.0.1', 8787))
        except OSError:
            pass  # taken already: all the better
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            with local_cluster(n_workers=1) as local:
                port = local.scheduler.http_server.port
    assert port != 8787
    assert not [w for w in caught if 'already in use' in str(w.message)]
