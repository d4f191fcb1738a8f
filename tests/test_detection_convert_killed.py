"""A conversion killed (SIGKILL) while it writes its shards, or half way through its
commit, leaves nothing a reader sees once the directory is next opened or written, and
the conversion run again writes the whole dataset. The run pauses where it is to be
killed and says so; the test kills it then (no timing involved)."""
import os
import signal
import subprocess
import sys

import pytest

from gluonbatch.detection import from_voc, make_voc_example
from gluonbatch.shards.commit import reading

from converted import read_back
from helpers import files, visible

#: Runs from_voc(argv[1] -> argv[2], 2 records per shard); pauses (prints 'paused', waits
#: for a line on stdin) after the argv[4]-th record written (argv[3] 'add'), or after a
#: file is moved onto the name argv[4] (argv[3] 'move').
RUN = '''
import os, sys
from gluonbatch.detection import from_voc
from gluonbatch.shards import writer
where, at = sys.argv[3], sys.argv[4]

def pause():
    print('paused', flush=True)
    sys.stdin.readline()

if where == 'add':
    real_add, added = writer.ShardWriter.add, []
    def add(self, key, members):
        real_add(self, key, members)
        added.append(key)
        if len(added) == int(at):
            self.handle.flush()
            pause()
    writer.ShardWriter.add = add
else:
    real_replace = os.replace
    def replace(source, target):
        real_replace(source, target)
        if target.endswith(os.sep + at):
            pause()
    os.replace = replace
from_voc(sys.argv[1], sys.argv[2], splits=[(2007, 'trainval')], samples_per_shard=2,
         progress=False)
print('done', flush=True)
'''


@pytest.fixture(scope='module')
def voc(tmp_path_factory):
    base = tmp_path_factory.mktemp('killed')
    root = make_voc_example(str(base / 'voc'), num_images=5, size=(64, 48), seed=2)
    reference = from_voc(root, str(base / 'reference'), splits=[(2007, 'trainval')],
                         samples_per_shard=2)
    return root, read_back(reference)


def _killed_at(root, dst, where, at):
    """Run the conversion, kill it where it paused; returns what ``dst`` held then."""
    run = subprocess.Popen([sys.executable, '-c', RUN, root, dst, where, str(at)], text=True,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert run.stdout.readline() == 'paused\n'
        seen = files(dst)
        run.send_signal(signal.SIGKILL)
        assert run.wait() == -signal.SIGKILL
    finally:
        run.kill()
        run.wait()
    return seen


def _settled_and_rerun(root, dst, want):
    with reading(dst):  # opening the directory settles what the killed run left
        assert files(dst) == []
    from_voc(root, dst, splits=[(2007, 'trainval')], samples_per_shard=2)
    manifest, records, rows = read_back(dst)
    assert (manifest['shards'], records, rows) == (want[0]['shards'], want[1], want[2])
    assert not [name for name in files(dst) if name.startswith('.')]


# one kill of each kind in the everyday tier, the others in the full one
@pytest.mark.parametrize('at', [1, pytest.param(3, marks=pytest.mark.slow)])
def test_killed_while_writing_shards_leaves_nothing_visible(voc, tmp_path, at):
    root, want = voc
    dst = str(tmp_path / 'out')
    seen = _killed_at(root, dst, 'add', at)
    # the records written so far are in the run's hidden staging directory only
    assert len(seen) == 1 and seen[0].startswith('.partial-')
    assert visible(dst) == []
    _settled_and_rerun(root, dst, want)


@pytest.mark.parametrize('moved', [pytest.param('00000.tar', marks=pytest.mark.slow),
                                   pytest.param('00001.parquet', marks=pytest.mark.slow),
                                   'detection.json'])
def test_killed_in_its_commit_leaves_nothing_once_the_directory_is_opened(voc, tmp_path,
                                                                          moved):
    root, want = voc
    dst = str(tmp_path / 'out')
    seen = _killed_at(root, dst, 'move', moved)
    assert moved in seen and any(name.startswith('.commit-') for name in seen)
    _settled_and_rerun(root, dst, want)


def test_killed_then_converted_again_without_opening_first(voc, tmp_path):
    """The rerun itself settles the killed commit before it checks the directory."""
    root, want = voc
    dst = str(tmp_path / 'out')
    assert 'detection.json' in _killed_at(root, dst, 'move', 'detection.json')
    from_voc(root, dst, splits=[(2007, 'trainval')], samples_per_shard=2)
    assert read_back(dst)[1] == want[1]


@pytest.mark.parametrize('existing', [False, True])
def test_an_error_while_writing_leaves_nothing(voc, tmp_path, monkeypatch, existing):
    """A failure after shards were begun (a disk full, say) removes them, and the
    directory the run made; an existing one is left as it was."""
    from gluonbatch.shards import writer

    root, want = voc
    dst = tmp_path / 'out'
    if existing:
        dst.mkdir()
    real_add, added = writer.ShardWriter.add, []

    def failing_add(self, key, members):
        if len(added) == 3:
            raise OSError(28, 'No space left on device')
        added.append(key)
        real_add(self, key, members)
    monkeypatch.setattr(writer.ShardWriter, 'add', failing_add)
    with pytest.raises(OSError, match='No space left'):
        from_voc(root, str(dst), splits=[(2007, 'trainval')], samples_per_shard=2)
    assert files(tmp_path) == (['out'] if existing else [])
    assert not existing or files(dst) == []
    monkeypatch.undo()
    from_voc(root, str(dst), splits=[(2007, 'trainval')], samples_per_shard=2)
    assert read_back(str(dst))[1] == want[1]
