"""All-or-nothing writes of several files: the hidden staging directory a run writes into,
and the commit journal that makes its files appear together, even across a kill.

A run writes every file into a hidden staging directory (``.partial-<id>``) of the
directory it writes to, and holds a lock on it (the system releases it if the run is
killed). When every file is written, :meth:`Stage.commit` records the moves it is about to
make in a journal (``.commit-<id>.json``, beside the staging directory, written whole under
a temporary name and renamed, and locked by the run too), makes them, removes the staging
directory and, last, the journal. A journal left behind means a commit a kill or an error
interrupted, and :func:`recover` (run before every read of a dataset directory and every
write into one) finishes it the way its run chose:

* ``'forward'`` (files that replace others, ``save_metadata``): the journal is written only
  once every new file is complete, so the commit is finished: the files not moved yet are
  moved. Readers see the old files or, after recovery, all the new ones.
* ``'back'`` (files that are added, ``to_webdataset``): the commit counts only when its
  journal is removed, so the files already moved are removed again. Readers and a rerun see
  no new file or all of them.

Recovery leaves a live run's work alone: a journal whose lock is held belongs to a commit
in progress, which it waits for (commits are renames, quickly done); a staging directory
whose lock is held belongs to a run still computing (another rank, say).

The guarantee is against the writing process dying (killed, interrupted, out of memory),
not against the machine losing power: only the journal is synced to disk.

Examples
--------
>>> import tempfile
>>> tmp = tempfile.TemporaryDirectory()
>>> with staging(tmp.name) as stage:
...     for name in ('a.txt', 'b.txt'):
...         with open(stage.file('.' + name), 'w') as handle:
...             _ = handle.write(name)
...     stage.commit([('.a.txt', 'a.txt'), ('.b.txt', 'b.txt')], 'back')
>>> sorted(os.listdir(tmp.name))
['a.txt', 'b.txt']
>>> tmp.cleanup()
"""
import contextlib
import fcntl
import json
import logging
import os
import shutil
import uuid

__all__ = ['staging', 'Stage', 'recover', 'FORWARD', 'BACK']

_LOG = logging.getLogger(__name__)

FORWARD, BACK = 'forward', 'back'
_STAGE_PREFIX = '.partial-'
_JOURNAL_PREFIX, _JOURNAL_SUFFIX = '.commit-', '.json'
_OWNER = '.owner'  # in a staging directory: locked by the run that writes there


def _lock(handle, wait):
    """Take ``handle``'s exclusive lock; False if ``wait`` is False and another holds it."""
    try:
        fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class Stage:
    """A run's staging directory in ``directory`` (made by :func:`staging`).

    Parameters
    ----------
    directory : str
        The directory the run writes to; the stage is a hidden directory inside it.
    """

    def __init__(self, directory):
        self.directory = directory
        self.id = uuid.uuid4().hex
        self.path = os.path.join(directory, _STAGE_PREFIX + self.id)
        self._journal = None      # (path, locked handle, content) once it is written
        self._moves_done = False  # every move of the commit made

    def file(self, name):
        """The path of ``name`` in the stage."""
        return os.path.join(self.path, name)

    def commit(self, moves, mode):
        """Move staged files into the directory, all or nothing.

        Parameters
        ----------
        moves : list of (str, str)
            ``(name in the stage, name in the directory)`` per file; every file complete.
        mode : {'forward', 'back'}
            How an interrupted commit is finished: ``'forward'`` completes it (the files
            replace others), ``'back'`` undoes it (the files are new).
        """
        if mode not in (FORWARD, BACK):
            raise ValueError("mode must be 'forward' or 'back', got %r" % (mode,))
        record = {'mode': mode, 'stage': os.path.basename(self.path),
                  'moves': [[source, target] for source, target in moves]}
        path = os.path.join(self.directory, _JOURNAL_PREFIX + self.id + _JOURNAL_SUFFIX)
        temporary = path + '.tmp'
        handle = open(temporary, 'w', encoding='utf-8')
        try:
            _lock(handle, wait=True)
            json.dump(record, handle)
            handle.flush()
            os.fsync(handle.fileno())
            os.replace(temporary, path)  # the lock stays with the open file
        except BaseException:
            handle.close()
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)
            raise
        self._journal = (path, handle, record)
        _move(self.directory, self.path, record['moves'])
        self._moves_done = True

    def close(self):
        """End the run: settle an interrupted commit, remove the stage, then the journal.

        A commit whose moves were all made is complete once its journal is removed; one
        interrupted by an error is finished or undone here (its ``mode``). If that fails
        too, the journal stays for :func:`recover`, and so do the staged files it needs.
        """
        if self._journal is not None and not self._moves_done:
            try:
                _settle(self.directory, self._journal[2])
            except BaseException:
                _LOG.error('could not finish the interrupted commit of %s; it is finished '
                           'when the directory is next read or written', self.directory)
                self._journal[1].close()
                raise
        shutil.rmtree(self.path, ignore_errors=True)
        if self._journal is not None:
            path, handle, _ = self._journal
            os.remove(path)  # the commit point of a 'back' commit
            handle.close()
            self._journal = None


@contextlib.contextmanager
def staging(directory):
    """A :class:`Stage` in ``directory`` that a run's tasks write into, removed at the end
    whatever happens; a task still running after a failure finds it gone and writes
    nothing. :func:`recover` runs first, so what a killed run left is finished or removed.
    """
    recover(directory)
    stage = Stage(directory)
    os.mkdir(stage.path)
    with open(stage.file(_OWNER), 'a') as owner:
        _lock(owner, wait=True)
        try:
            yield stage
        finally:
            stage.close()


def _read_journal(path, handle):
    """The journal at ``path``, read through ``handle``, checked."""
    try:
        journal = json.loads(handle.read().decode('utf-8'))
        valid = (isinstance(journal, dict) and journal.get('mode') in (FORWARD, BACK)
                 and isinstance(journal.get('stage'), str)
                 and isinstance(journal.get('moves'), list))
    except ValueError:
        valid = False
    if not valid:
        raise ValueError('%s is a damaged commit journal: the commit it describes cannot be '
                         'finished; check the directory by hand and remove it' % path)
    return journal


def _move(directory, stage_path, moves):
    for source, target in moves:
        os.replace(os.path.join(stage_path, source), os.path.join(directory, target))


def _settle(directory, journal):
    """Finish (``'forward'``) or undo (``'back'``) the journal's commit. Safe to repeat: a
    file still staged was not moved; one no longer staged was."""
    stage_path = os.path.join(directory, journal['stage'])
    if journal['mode'] == FORWARD:
        _move(directory, stage_path,
              [(source, target) for source, target in journal['moves']
               if os.path.exists(os.path.join(stage_path, source))])
        return
    for source, target in journal['moves']:
        if not os.path.exists(os.path.join(stage_path, source)):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(directory, target))


def recover(directory):
    """Finish or undo the commits that killed runs left in ``directory`` and remove their
    staging directories; wait for a commit in progress. Nothing to do (the usual case)
    costs one directory listing.

    Raises
    ------
    OSError
        The directory cannot be changed (read-only?) while a commit is unfinished.
    ValueError
        A journal that is not one (damaged: written by a machine that lost power).
    """
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in sorted(names):
        path = os.path.join(directory, name)
        if not name.startswith(_JOURNAL_PREFIX):
            continue
        if name.endswith(_JOURNAL_SUFFIX):
            _recover_journal(directory, path)
        elif name.endswith(_JOURNAL_SUFFIX + '.tmp'):
            _remove_if_unlocked(path)  # killed while writing it: nothing was moved
    for name in names:
        if name.startswith(_STAGE_PREFIX):
            _remove_abandoned_stage(os.path.join(directory, name))


def _recover_journal(directory, path):
    try:
        handle = open(path, 'rb')
    except FileNotFoundError:
        return  # its commit ended meanwhile
    with handle:
        _lock(handle, wait=True)  # a live commit: wait for it to end
        if os.fstat(handle.fileno()).st_nlink == 0:
            return  # it ended and removed its journal
        journal = _read_journal(path, handle)
        _settle(directory, journal)
        _LOG.warning('finished the interrupted commit of %s (%s)', directory,
                     'its new files are in place' if journal['mode'] == FORWARD
                     else 'its files were removed: run it again')
        shutil.rmtree(os.path.join(directory, journal['stage']), ignore_errors=True)
        os.remove(path)


def _remove_if_unlocked(path):
    try:
        handle = open(path, 'rb')
    except FileNotFoundError:
        return
    with handle:
        if _lock(handle, wait=False):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)


def _remove_abandoned_stage(path):
    """Remove a staging directory whose run is gone (its owner file's lock can be taken);
    one of a run still going stays."""
    try:
        handle = open(os.path.join(path, _OWNER), 'a')
    except OSError:  # killed before it made its owner file, or being removed
        shutil.rmtree(path, ignore_errors=True)
        return
    with handle:
        if _lock(handle, wait=False):
            shutil.rmtree(path, ignore_errors=True)
