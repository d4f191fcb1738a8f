"""All-or-nothing commits: ``save_metadata`` and ``to_webdataset`` stopped at every
file-system step in turn -- killed (in a forked child, by ``commit_faults.py``) or
interrupted (Ctrl-C) -- leave a directory that reads as the complete old state or the
complete new one, and a rerun always succeeds with exactly the full record set."""
import json
import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from gluonbatch.curation import ImageTextPairDataset
from gluonbatch.shards.commit import recover, staging
from gluonbatch.shards.manifest import MANIFEST, write_manifest

from helpers import ID, files, make_dataset, visible

HERE = os.path.dirname(os.path.abspath(__file__))
# Two input shards of different sizes, written to two output shards: each kind of step comes
# once per shard; a third shard, in or out, would only repeat its steps.
SIZES = (2, 4)


@pytest.fixture(scope='module')
def source(tmp_path_factory):
    """The dataset, with a manifest listing its shards (as a detection dataset has): a
    write moves it last, in the same commit."""
    path = str(tmp_path_factory.mktemp('source'))
    make_dataset(path, sizes=SIZES, index=True)
    write_manifest(os.path.join(path, MANIFEST),
                   {'shards': [['%05d' % n, size] for n, size in enumerate(SIZES)]})
    return path


def _stop_at_every_step(operation, source, work, mode):
    """Run the driver; returns the step directories in order and what each step was."""
    done = subprocess.run([sys.executable, os.path.join(HERE, 'commit_faults.py'), operation,
                           source, str(work), mode], capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(os.path.join(work, 'steps.json')) as handle:
        steps = json.load(handle)
    dirs = sorted(name for name in os.listdir(work) if name.startswith('step-'))
    assert len(dirs) == len(steps)
    return [os.path.join(work, name) for name in dirs], steps


def _contents(path):
    """A dataset as plain values: its metadata rows and every record's members."""
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    rows = ds.metadata.compute().to_dict('records')
    return rows, [ds.read_raw(i) for i in range(len(ds))]


def _hidden(path):
    return [name for name in files(path) if name.startswith('.')]


def _journals(path):
    return [name for name in _hidden(path) if name.startswith('.commit-')]


# --------------------------------------------------------------------------- save_metadata

# save_metadata stopped one way in the everyday tier; every other stopped run in the full one
@pytest.mark.parametrize('mode', ['kill', pytest.param('interrupt', marks=pytest.mark.slow)])
def test_save_metadata_stopped_at_any_step_reads_old_or_new_and_reruns(source, tmp_path,
                                                                       mode):
    old = ImageTextPairDataset.from_webdataset(source, ID).metadata.compute()
    new = old.assign(area=old['width'] * old['height'])
    dirs, steps = _stop_at_every_step('save_metadata', source, tmp_path, mode)
    # the renames of the commit are among the steps, so the test reaches into it
    assert sum(step.startswith('replace(.journal, .commit-') for step in steps) == 1
    assert sum(step == 'replace(%05d.parquet, %05d.parquet)' % (k, k)
               for step in steps for k in range(len(SIZES))) == len(SIZES)
    outcomes = []
    for step_dir, step in zip(dirs, steps):
        data = os.path.join(step_dir, 'data')
        if mode == 'interrupt':  # the run settled its commit itself
            assert not _journals(data), (step, files(data))
        if not _journals(data):  # nothing to finish: what a reader sees is consistent
            columns = {tuple(pd.read_parquet(os.path.join(data, name)).columns)
                       for name in visible(data) if name.endswith('.parquet')}
            assert len(columns) == 1, (step, columns)
        seen = ImageTextPairDataset.from_webdataset(data, ID).metadata.compute()
        if 'area' in seen.columns:
            pd.testing.assert_frame_equal(seen, new, obj='after %s' % step)
            outcomes.append('new')
        else:
            pd.testing.assert_frame_equal(seen, old, obj='after %s' % step)
            outcomes.append('old')
        assert _hidden(data) == [], (step, files(data))  # opening finished the commit
        again = ImageTextPairDataset.from_webdataset(data, ID)
        again.metadata['area'] = again.metadata['width'] * again.metadata['height']
        again.save_metadata()
        pd.testing.assert_frame_equal(
            ImageTextPairDataset.from_webdataset(data, ID).metadata.compute(), new)
        assert _hidden(data) == []
    # stopped before its journal the run changed nothing; after it, the commit is finished
    assert outcomes[0] == 'old' and outcomes[-1] == 'new', list(zip(steps, outcomes))
    first_new = outcomes.index('new')
    assert outcomes == ['old'] * first_new + ['new'] * (len(outcomes) - first_new)
    assert steps[first_new - 1].startswith('replace(.journal, .commit-'), steps[first_new - 1]


# --------------------------------------------------------------------------- to_webdataset

@pytest.mark.parametrize('mode', [pytest.param('kill', marks=pytest.mark.slow),
                                  pytest.param('interrupt', marks=pytest.mark.slow)])
def test_to_webdataset_stopped_at_any_step_leaves_nothing_and_reruns(source, tmp_path, mode):
    ds = ImageTextPairDataset.from_webdataset(source, ID)
    ds.metadata['keep'] = ds.metadata['score'] < 0.7
    reference = str(tmp_path / 'reference')
    ds.to_webdataset(reference, 'keep', samples_per_shard=3, old_id_col='old_key')
    want = _contents(reference)
    assert len(want[1]) >= 3 and len(files(reference)) >= 6  # several output shards
    dirs, steps = _stop_at_every_step('to_webdataset', source, tmp_path / 'runs', mode)
    shard_files = files(reference)
    assert MANIFEST in shard_files
    assert sum(step.startswith('replace(.') and step.split(', ')[1][:-1] in shard_files
               for step in steps) == len(shard_files)  # every rename of the commit
    for step_dir, step in zip(dirs, steps):
        out = os.path.join(step_dir, 'out')
        if mode == 'interrupt' and os.path.isdir(out):  # the run settled its commit itself
            assert not _journals(out) and visible(out) == [], (step, files(out))
        if os.path.isdir(out):
            if MANIFEST in visible(out):  # the manifest only beside every shard it lists
                assert visible(out) == shard_files, (step, files(out))
            if not _journals(out):  # nothing to undo: no shard is visible
                assert visible(out) == [], (step, files(out))
            with pytest.raises(FileNotFoundError, match='holds no shards'):
                ImageTextPairDataset.from_webdataset(out, ID)  # undoes a half commit
            assert files(out) == [], (step, files(out))
        ds.to_webdataset(out, 'keep', samples_per_shard=3, old_id_col='old_key')
        assert files(out) == shard_files, step
        assert _contents(out) == want, step


# --------------------------------------------------------------------------- the journal

#: The start of a script that pauses its run after it moves a file onto a name ending in
#: ``/<sys.argv[2]>``: it prints 'paused' and waits for a line on its standard input.
PAUSING = '''
import os, sys
real_replace = os.replace
def pausing(source, target):
    real_replace(source, target)
    if target.endswith(os.sep + sys.argv[2]):
        print('paused', flush=True)
        sys.stdin.readline()
os.replace = pausing
'''

@pytest.mark.skipif(not os.path.exists('/proc/locks'), reason='needs /proc/locks')
def test_a_live_commit_is_waited_for_and_a_live_stage_left_alone(tmp_path):
    """Recovery in another process while a run stages and commits: it leaves the live
    stage alone and, during the commit, waits for it instead of undoing it."""
    script = PAUSING + '''
from gluonbatch.shards.commit import staging
with staging(sys.argv[1]) as stage:
    with open(stage.file('.a'), 'w') as handle:
        handle.write('a')
    print('staged', flush=True)
    sys.stdin.readline()
    stage.commit([('.a', 'a')], 'back')
print('done', flush=True)
'''
    run = subprocess.Popen([sys.executable, '-c', script, str(tmp_path), 'a'], text=True,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert run.stdout.readline() == 'staged\n'
        recover(str(tmp_path))  # the run holds its stage: it stays
        assert len(_hidden(tmp_path)) == 1 and _hidden(tmp_path)[0].startswith('.partial-')
        run.stdin.write('\n')
        run.stdin.flush()
        assert run.stdout.readline() == 'paused\n'  # its journal written, 'a' moved
        assert 'a' in files(tmp_path)
        recovery = subprocess.Popen(
            [sys.executable, '-c', 'import sys; from gluonbatch.shards.commit import '
             'recover; recover(sys.argv[1]); print(sorted(__import__("os").listdir('
             'sys.argv[1])))', str(tmp_path)], text=True, stdout=subprocess.PIPE)
        assert _waits_for_a_lock(recovery)  # blocked on the directory's lock
        run.stdin.write('\n')
        run.stdin.flush()
        assert run.stdout.readline() == 'done\n'
        seen, _ = recovery.communicate(timeout=300)
        assert recovery.returncode == 0
        assert seen.strip() == "['a']"  # it waited for the commit and kept its file
    finally:
        run.kill()
        run.wait()


def _waits_for_a_lock(process):
    """Whether ``process`` comes to wait for a file lock (``/proc/locks`` lists the locks
    a process waits for with ``->``) before it ends; polled, for a while at most."""
    for _ in range(3000):
        with open('/proc/locks') as locks:
            if any('->' in line and ' %d ' % process.pid in line for line in locks):
                return True
        if process.poll() is not None:
            return False
        time.sleep(0.05)
    return False


@pytest.mark.parametrize('journal', [
    '{"mode": "sideways"}', 'not json',
    '{"mode": "back", "stage": "../victim", "moves": []}',
    '{"mode": "back", "stage": ".partial-%s", "moves": [["a", "/tmp/x", 1]]}' % ('0' * 32),
    '{"mode": "forward", "stage": ".partial-%s", "moves": [["../a", "b", 1]]}' % ('0' * 32),
    '{"mode": "back", "stage": ".partial-%s", "moves": [["a", "b"]]}' % ('0' * 32)],
    ids=['mode', 'json', 'stage-outside', 'absolute-target', 'source-outside', 'no-inode'])
def test_a_damaged_or_tampered_journal_is_refused_naming_it(tmp_path, journal):
    """Settling a journal touches nothing outside its directory: one that names anything
    but plain names there is refused, and nothing is changed."""
    data = tmp_path / 'data'
    data.mkdir()
    (tmp_path / 'victim').mkdir()
    (data / '.commit-0123.json').write_text(journal)
    with pytest.raises(ValueError, match=r'\.commit-0123\.json is a damaged commit journal'):
        recover(str(data))
    with pytest.raises(ValueError, match='damaged commit journal'):
        ImageTextPairDataset.from_webdataset(data, ID)
    assert files(data) == ['.commit-0123.json'] and (tmp_path / 'victim').is_dir()


def test_a_back_commit_never_replaces_or_removes_another_runs_files(tmp_path):
    """Two runs adding the same file: the second is refused before it moves anything, and
    undoing a commit removes only the files it moved (known by their inodes)."""
    (tmp_path / 'b').write_text('theirs')
    with staging(str(tmp_path)) as stage:
        for name in ('.a', '.b'):
            (tmp_path / stage.file(name)).write_text('ours')
        with pytest.raises(ValueError, match=r'already holds b: another run wrote into it'):
            stage.commit([('.a', 'a'), ('.b', 'b')], 'back')
    assert files(tmp_path) == ['b'] and (tmp_path / 'b').read_text() == 'theirs'


def test_opening_a_file_is_still_no_dataset_directory(tmp_path):
    (tmp_path / 'file').write_text('x')
    with pytest.raises(FileNotFoundError, match='no dataset directory'):
        ImageTextPairDataset.from_webdataset(tmp_path / 'file', ID)


READER_DURING_A_COMMIT = PAUSING + '''
from gluonbatch.curation import ImageTextPairDataset
ds = ImageTextPairDataset.from_webdataset(sys.argv[1], 'key')
ds.metadata['area'] = ds.metadata['width'] * ds.metadata['height']
ds.save_metadata()
print('saved', flush=True)
'''


@pytest.mark.skipif(not os.path.exists('/proc/locks'), reason='needs /proc/locks')
def test_a_dataset_opened_during_a_commit_is_read_after_it(tmp_path):
    """A reader never sees a commit half way: opening waits for the one under way, then
    reads every shard's new columns."""
    make_dataset(str(tmp_path), sizes=(2, 3, 1))
    run = subprocess.Popen([sys.executable, '-c', READER_DURING_A_COMMIT, str(tmp_path),
                            '00000.parquet'],
                           text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert run.stdout.readline() == 'paused\n'  # one parquet of three replaced
        reader = subprocess.Popen(
            [sys.executable, '-c', 'import sys; from gluonbatch.curation import '
             'ImageTextPairDataset as D; print(sorted(D.from_webdataset(sys.argv[1], '
             '"key").metadata.compute().columns))', str(tmp_path)],
            text=True, stdout=subprocess.PIPE)
        assert _waits_for_a_lock(reader)
        run.stdin.write('\n')
        run.stdin.flush()
        assert run.stdout.readline() == 'saved\n'
        seen, _ = reader.communicate(timeout=300)
        assert reader.returncode == 0 and 'area' in seen, seen
    finally:
        run.kill()
        run.wait()


def test_commit_refuses_an_unknown_mode_and_changes_nothing(tmp_path):
    with staging(str(tmp_path)) as stage:
        (tmp_path / stage.file('.a')).write_text('a')
        with pytest.raises(ValueError, match="mode must be 'forward' or 'back', got 'up'"):
            stage.commit([('.a', 'a')], 'up')
    assert files(tmp_path) == []


def test_recovery_of_a_directory_without_commits_changes_nothing(tmp_path):
    make_dataset(str(tmp_path), sizes=(2,))
    before = {name: (tmp_path / name).read_bytes() for name in files(tmp_path)}
    recover(str(tmp_path))
    recover(str(tmp_path / 'missing'))  # no directory: nothing to do
    assert {name: (tmp_path / name).read_bytes() for name in files(tmp_path)} == before
    assert visible(tmp_path) == files(tmp_path)
