"""Helpers shared by the tests: the output context, walking batches, comparing a batch with
its reference, independent records of inputs (to prove batchify neither changes nor aliases
them), a tiny R-CNN network, gluoncv's model-zoo networks built without weights, the number
of examples a property test runs in the active tier, and WebDataset shards written
independently of gluonbatch's writer.

The WebDatasets here are built with tarfile, Pillow JPEGs and pandas parquet, not with
gluonbatch's writer, so the reader is checked against independently written shards;
faults (truncation, corrupt headers, stale indexes, bad names) are injected into those
files.
"""
import ast
import collections.abc
import copy
import gc
import io
import json
import multiprocessing
import os
import tarfile
import time
import warnings

import mxnet as mx
import numpy as np
import pandas as pd
from hypothesis import settings
from PIL import Image

from gluonbatch.shards import write_index

#: Where every NDArray gluonbatch returns lives (default memory setting).
SHARED = mx.Context('cpu_shared', 0)


def batch_leaves(batch, path='batch'):
    """(path, leaf) for every leaf of a batch nested in tuples, lists, dicts, namedtuples."""
    if isinstance(batch, collections.abc.Mapping):
        for key, value in batch.items():
            yield from batch_leaves(value, '%s[%r]' % (path, key))
    elif isinstance(batch, (list, tuple)):
        for index, value in enumerate(batch):
            yield from batch_leaves(value, '%s[%d]' % (path, index))
    else:
        yield path, batch


def assert_same_batch(ours, theirs, compare_context=True, path='batch', arrays_only=False):
    """Assert ``ours`` (gluonbatch's result) is exactly ``theirs`` (the reference), recursively.

    What ``theirs`` holds decides what ``ours`` must be:

    * an NDArray: an NDArray of the same type and default storage (theirs too), in
      cpu_shared(0), of the same shape, dtype and values (NaN equals NaN);
    * a numpy array (a reference computed with numpy): an NDArray in cpu_shared(0) of default
      storage and the same shape, dtype and values (NaN equals NaN);
    * a tuple or list: the same type (a namedtuple's too) and length, element by element;
    * a dict: the same type and keys in the same order, value by value;
    * anything else: the same type and an equal value.

    ``compare_context`` also requires ``ours.context == theirs.context`` for NDArray
    references; it may be a bool or, for a tuple/list, a sequence with one flag (or nested
    sequence) per element -- e.g. ``(True, False)`` for ``Tuple(Pad(), Append())``, as
    gluoncv's Append(expand=True) returns cpu(0) arrays. A numpy reference has no context,
    so it must be compared with ``compare_context`` false. ``arrays_only`` declares that the
    reference holds only NDArrays in tuples and lists: anything else in it is an error.
    """
    if isinstance(theirs, (mx.nd.NDArray, np.ndarray)):
        if isinstance(theirs, np.ndarray):
            assert not arrays_only, '%s: unexpected reference type %s' % (path, type(theirs))
            assert not compare_context, '%s: a numpy reference has no context' % path
            assert type(ours) is mx.nd.NDArray, '%s: %s is not an NDArray' % (
                path, type(ours).__name__)
            ref = theirs
        else:
            assert type(ours) is type(theirs), '%s: %s is not a %s' % (
                path, type(ours).__name__, type(theirs).__name__)
            assert theirs.stype == 'default', '%s: reference stype %s' % (path, theirs.stype)
        assert ours.stype == 'default', '%s: stype %s' % (path, ours.stype)
        assert ours.context == SHARED, '%s: ours is in %s, not cpu_shared(0)' % (
            path, ours.context)
        if isinstance(theirs, mx.nd.NDArray):
            if compare_context:
                assert ours.context == theirs.context, '%s: context %s != %s' % (
                    path, ours.context, theirs.context)
            ref = theirs.asnumpy()
        assert ours.shape == theirs.shape, '%s: shape %s != %s' % (
            path, ours.shape, theirs.shape)
        assert np.dtype(ours.dtype) == np.dtype(theirs.dtype), '%s: dtype %s != %s' % (
            path, np.dtype(ours.dtype), np.dtype(theirs.dtype))
        mine = ours.asnumpy()
        assert mine.dtype == ref.dtype and mine.shape == ref.shape, path
        np.testing.assert_array_equal(mine, ref, err_msg=path)
        return
    if arrays_only and not isinstance(theirs, (tuple, list)):
        raise AssertionError('%s: unexpected reference type %s' % (path, type(theirs)))
    assert type(ours) is type(theirs), '%s: %s is not a %s' % (
        path, type(ours).__name__, type(theirs).__name__)
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs), '%s: %d elements != %d' % (
            path, len(ours), len(theirs))
        if isinstance(compare_context, (tuple, list)):
            assert len(compare_context) == len(theirs), 'bad compare_context for ' + path
            flags = compare_context
        else:
            flags = [compare_context] * len(theirs)
        for index, (mine, ref, flag) in enumerate(zip(ours, theirs, flags)):
            assert_same_batch(mine, ref, flag, '%s[%d]' % (path, index), arrays_only)
        return
    assert not isinstance(compare_context, (tuple, list)), 'bad compare_context for ' + path
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs), '%s: keys %s != %s' % (
            path, list(ours), list(theirs))
        for key in theirs:
            assert_same_batch(ours[key], theirs[key], compare_context, '%s[%r]' % (path, key))
    else:
        assert ours == theirs, '%s: %r != %r' % (path, ours, theirs)


def ndarrays(batch):
    """The NDArray leaves of ``batch``, depth first."""
    return [leaf for _, leaf in batch_leaves(batch) if isinstance(leaf, mx.nd.NDArray)]


def snapshot(value):
    """An independent record of ``value`` (arrays copied, containers walked)."""
    if isinstance(value, mx.nd.NDArray):
        return ('nd', value.shape, np.dtype(value.dtype), value.context, value.asnumpy().copy())
    if isinstance(value, np.ndarray):
        return ('np', value.shape, value.dtype, value.copy())
    if isinstance(value, np.generic):
        return ('np', (), value.dtype, np.array(value))
    if isinstance(value, collections.abc.Mapping):
        return (type(value), [(key, snapshot(item)) for key, item in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value), [(index, snapshot(item)) for index, item in enumerate(value)])
    return ('value', type(value), copy.deepcopy(value))


def assert_unchanged(before, after, path='input'):
    """Raise unless two :func:`snapshot` records are equal (NaN equals NaN)."""
    assert before[0] == after[0], path
    if before[0] in ('nd', 'np'):
        assert before[1:-1] == after[1:-1], path
        np.testing.assert_array_equal(after[-1], before[-1], err_msg=path)
    elif before[0] == 'value':
        assert before[1] is after[1], path
        assert before[2] == after[2] or (before[2] != before[2] and after[2] != after[2]), path
    else:
        assert [key for key, _ in before[1]] == [key for key, _ in after[1]], path
        for (key, b), (_, a) in zip(before[1], after[1]):
            assert_unchanged(b, a, '%s[%r]' % (path, key))


def overwrite_all(batch):
    """Change every element of every writable, non-empty NDArray in ``batch``."""
    for array in ndarrays(batch):
        if array.ndim == 0 or array.size == 0:
            continue  # legacy NDArrays of these shapes cannot be written from Python
        current = array.asnumpy()
        changed = (current == 0).astype(current.dtype)  # 0 -> 1, anything else (NaN too) -> 0
        array[:] = changed
        array.wait_to_read()
        np.testing.assert_array_equal(array.asnumpy(), changed)


def tiny_rcnn_net(channels=8, stride=16):
    """A network with the ``features`` block R-CNN batchifiers read: one strided conv."""
    net = mx.gluon.nn.HybridSequential()
    net.features = mx.gluon.nn.Conv2D(channels, 3, strides=stride, padding=1)
    return net


def build_zoo_net(name, anchors_only=False):
    """gluoncv's model-zoo network ``name`` built offline (no weights), its parameters
    initialized -- with ``anchors_only``, only those of its RPN's anchor generator (all an
    R-CNN preset or batchifier reads, with the ``features`` graph)."""
    from gluoncv.model_zoo import get_model

    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)  # gluoncv's SymbolBlocks: untyped inputs
        net = get_model(name, pretrained=False, pretrained_base=False)
        if anchors_only:
            net.rpn.anchor_generator.initialize()
        else:
            net.initialize()
    return net


def ssd_anchors_of(net, width, height):
    """The anchors an SSD network's train-mode forward returns for a ``width`` x ``height``
    image: a ``(1, N, 4)`` NDArray."""
    with warnings.catch_warnings(), mx.autograd.train_mode():
        warnings.simplefilter('ignore', UserWarning)
        _, _, anchors = net(mx.nd.zeros((1, 3, height, width)))
    return anchors


# ------------------------------------------------------------------- hypothesis examples

#: hypothesis's default ``max_examples``: the full tier's profiles keep it, and every
#: property test's own count is relative to it.
FULL_TIER_EXAMPLES = 100


def examples(full, least=10, profile=None):
    """How many examples a property test that runs ``full`` in the full tier runs under
    ``profile`` (the active hypothesis settings by default).

    A count scales as the profile's default ``max_examples`` does against the full tier's
    (:data:`FULL_TIER_EXAMPLES`), so one profile setting scales the tests that set their
    own count and those that do not alike. It is never below ``least``, nor below ``full``
    when ``full`` is smaller: a test keeps a few examples in every tier.

    Examples
    --------
    >>> examples(80, profile=settings(max_examples=100))
    80
    >>> examples(200, profile=settings(max_examples=25))
    50
    >>> examples(30, profile=settings(max_examples=25)), examples(6, profile=settings(
    ...     max_examples=25))
    (10, 6)
    """
    profile = settings.default if profile is None else profile
    return max(min(full, least), full * profile.max_examples // FULL_TIER_EXAMPLES)


# --------------------------------------------------------------------------- WebDatasets

ID = 'key'
TIMEOUT = 60  # seconds a DataLoader waits for a worker


def imported_names(source, module, is_package=False, anywhere=True):
    r"""The absolute names the import statements of ``source`` (the text of module ``module``)
    name: ``import a.b`` gives ``a.b``; ``from .m import f`` gives ``<package>.m`` and
    ``<package>.m.f`` (``f`` may be a module or not). With ``anywhere=False`` only the
    statements run while the module loads (its top level).

    >>> sorted(imported_names('from ..memory import get\nimport numpy', 'pkg.sub.mod'))
    ['numpy', 'pkg.memory', 'pkg.memory.get']
    """
    base = module.split('.') if is_package else module.split('.')[:-1]
    tree = ast.parse(source)
    found = set()
    for node in ast.walk(tree) if anywhere else tree.body:
        if isinstance(node, ast.ImportFrom):
            anchor = base[:len(base) - node.level + 1] if node.level else []
            target = '.'.join(anchor + ([node.module] if node.module else []))
            found.update(target + '.' + alias.name for alias in node.names)
            if node.module:
                found.add(target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def jpeg_bytes(seed, height, width):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, 'JPEG', quality=85)
    return out.getvalue()


def record(shard, sample, digits=4, key=None):
    """One record of shard ``shard``: id by the layout's rule (or ``key``), real JPEG,
    caption, json."""
    key = '%05d%0*d' % (shard, digits, sample) if key is None else key
    height, width = 8 + (3 * shard + sample) % 9, 8 + (5 * shard + 2 * sample) % 11
    caption = 'caption of %s: a café, number %d' % (key, sample)
    meta = {ID: key, 'width': width, 'height': height, 'url': 'http://x/%s.jpg' % key}
    return {'key': key, 'jpg': jpeg_bytes(shard * 10 ** digits + sample, height, width),
            'txt': caption.encode('utf-8'), 'json': json.dumps(meta).encode('utf-8'),
            'row': {ID: key, 'caption': caption, 'width': width, 'height': height,
                    'score': float(sample) / 10, 'shard': shard}}


def write_tar(path, members, fmt=tarfile.PAX_FORMAT, mtime=1700000000):
    """A tar of ``[(name, bytes), ...]`` written by the stdlib; ``bytes`` None is a directory.

    A float ``mtime`` gives every member a pax header in ``PAX_FORMAT`` (as the
    ``webdataset`` library's TarWriter writes them).
    """
    with tarfile.open(path, 'w', format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.mtime = mtime
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def members_of(records):
    return [('%s.%s' % (rec['key'], ext), rec[ext]) for rec in records
            for ext in ('jpg', 'txt', 'json')]


def write_shard(directory, stem, records, shuffle=None, index=False):
    """``stem.tar`` + ``stem.parquet`` (+ ``stem.idx``); ``shuffle`` permutes both orders."""
    order = list(records)
    if shuffle is not None:
        order = [order[i] for i in shuffle.permutation(len(order))]
    write_tar(os.path.join(directory, stem + '.tar'), members_of(order))
    if shuffle is not None:
        order = [order[i] for i in shuffle.permutation(len(order))]
    frame = pd.DataFrame([rec['row'] for rec in order],
                         columns=[ID, 'caption', 'width', 'height', 'score', 'shard'])
    frame.to_parquet(os.path.join(directory, stem + '.parquet'), index=False)
    if index:
        write_index(os.path.join(directory, stem + '.tar'))


def make_dataset(directory, sizes=(3, 2, 4), index=False, shuffle_seed=None):
    """Shards of the given sizes; returns the records in the dataset's expected order."""
    os.makedirs(directory, exist_ok=True)
    expected = []
    rng = None if shuffle_seed is None else np.random.default_rng(shuffle_seed)
    for shard, size in enumerate(sizes):
        records = [record(shard, sample) for sample in range(size)]
        write_shard(directory, '%05d' % shard, records, shuffle=rng, index=index)
        expected += sorted(records, key=lambda rec: rec['key'])
    return expected


def add_column(ds, name, values):
    """Give ``ds.metadata`` a column ``name`` holding ``values[i]`` for record ``i``, lazily
    (a Dask column partitioned like the metadata)."""
    values = np.asarray(values)
    ds.metadata[name] = ds.metadata.map_partitions(
        lambda frame: pd.Series(values[frame.index.to_numpy()], index=frame.index),
        meta=(name, values.dtype))


def read_everything(path, id_col=ID, **kwargs):
    """Open the dataset at ``path``, compute its metadata and read every record: what
    raises the errors of any shard (they are raised when a shard is first used)."""
    from gluonbatch.curation import ImageTextPairDataset

    ds = ImageTextPairDataset.from_webdataset(path, id_col, **kwargs)
    ds.metadata.compute()
    for i in range(len(ds)):
        ds.read_raw(i)
    return ds


def check_record(ds, i, rec):
    image, caption, meta = ds[i]
    assert isinstance(image, mx.nd.NDArray) and image.dtype == np.uint8
    assert image.shape == (rec['row']['height'], rec['row']['width'], 3)
    np.testing.assert_array_equal(image.asnumpy(), mx.image.imdecode(rec['jpg']).asnumpy())
    assert caption == rec['txt'].decode('utf-8') and isinstance(caption, str)
    assert meta == json.loads(rec['json'])


def files(directory):
    return sorted(os.listdir(directory))


def visible(directory):
    """The files of ``directory`` a dataset reader sees: not hidden ones."""
    return [name for name in files(directory) if not name.startswith('.')]


def cut(path, size):
    with open(path, 'r+b') as handle:
        handle.truncate(size)


def tar_infos(path):
    with tarfile.open(path) as tar:
        return tar.getmembers()


def edit_index(path, edit):
    idx = os.path.join(path, '00000.idx')
    lines = open(idx).read().splitlines()
    open(idx, 'w').write('\n'.join(edit(lines)) + '\n')


# ----------------------------------------------------------------- processes and /dev/shm

def open_fds(pid='self'):
    """How many file descriptors process ``pid`` has open."""
    return len(os.listdir('/proc/%s/fd' % pid))


def _shm_entries(pid):
    """``(segment, bytes)`` for every descriptor and mapping of a ``/dev/shm`` file that
    process ``pid`` holds; ``segment`` is the file's ``(device, inode)``.

    MXNet removes a segment's name as soon as it creates it, so the segments a process
    holds are seen only here, as ``/dev/shm/mx_... (deleted)``.
    """
    for fd in os.listdir('/proc/%s/fd' % pid):
        link = '/proc/%s/fd/%s' % (pid, fd)
        try:
            if os.readlink(link).startswith('/dev/shm/'):
                info = os.stat(link)
                yield (info.st_dev, info.st_ino), info.st_size
        except OSError:  # closed meanwhile
            pass
    with open('/proc/%s/maps' % pid) as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith('/dev/shm/'):
                start, end = (int(bound, 16) for bound in fields[0].split('-'))
                major, minor = (int(part, 16) for part in fields[3].split(':'))
                yield (os.makedev(major, minor), int(fields[4])), end - start


def replacement_warnings(caught):
    """The messages of the warnings in ``caught`` (``warnings.catch_warnings(record=True)``)
    that say a loader replaced a worker process."""
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)
            and 'replaces it' in str(w.message)]


def mxnet_blocks(pids):
    """The names of the ``/dev/shm`` files MXNet made in processes ``pids``: it names them
    ``mx_<pid>_<id>``, both in hex, so files of other programs (the tests of another file
    running beside these, say) are not counted.

    >>> mxnet_blocks([2 ** 40])  # no process has that id
    []
    """
    prefixes = tuple('mx_%x_' % pid for pid in pids)
    return sorted(name for name in os.listdir('/dev/shm') if name.startswith(prefixes))


def half_made(pid):
    """Leave in ``/dev/shm`` what process ``pid`` would leave if killed while MXNet made a
    shared array: the file, under MXNet's name for it (see :func:`mxnet_blocks`), not yet
    removed."""
    with open('/dev/shm/mx_%x_%x' % (pid, 2 ** 40 + 1), 'wb') as block:
        block.write(bytes(64))


def run_in_fork(target, *args):
    """Run ``target(*args, report)`` in a forked child process; what it sent through
    ``report`` (the sending end of a pipe) and the child's exit code."""
    context = multiprocessing.get_context('fork')
    receive, report = context.Pipe(duplex=False)
    child = context.Process(target=target, args=args + (report,))
    child.start()
    report.close()
    sent = receive.recv()
    child.join()
    return sent, child.exitcode


def shm_held(pid='self'):
    """How many mappings and descriptors of ``/dev/shm`` files process ``pid`` holds."""
    return sum(1 for _ in _shm_entries(pid))


def shm_bytes(pids):
    """Bytes of the distinct ``/dev/shm`` files that processes ``pids`` hold open or map:
    what they keep of shared memory, counted from their own ``/proc`` entries (never the
    whole of ``/dev/shm``, which other programs share)."""
    sizes = {}
    for pid in pids:
        for segment, size in _shm_entries(pid):
            sizes[segment] = max(sizes.get(segment, 0), size)
    return sum(sizes.values())


def settled(read):
    """``read()`` once MXNet has freed what it was asked to and two readings agree.

    Frees run on MXNet's engine, and a thread pool's threads drop their last batch only
    when they next run (a result handler clears its locals after handing a result over),
    so readings are repeated, with other threads given time to run, until they agree.
    """
    def collected():
        gc.collect()
        mx.nd.waitall()
        return read()

    counts = collected()
    for _ in range(100):
        time.sleep(0.02)
        counts, previous = collected(), counts
        if counts == previous:
            break
    return counts


# ----------------------------------------------------------------- Dask clusters

def local_cluster(n_workers=2):
    """A ``distributed.LocalCluster`` of single-threaded worker processes on 127.0.0.1.

    Its scheduler's HTTP server (the dashboard, when bokeh is installed, and the health
    routes otherwise) binds a free port: the default, 8787, may be another cluster's, of
    this suite running twice at once or of another program.
    """
    import distributed

    return distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                    host='127.0.0.1', dashboard_address='127.0.0.1:0')
