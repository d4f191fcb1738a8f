"""All-or-nothing writes of several files: the hidden staging directory a run writes into,
and the commit journal that makes its files appear together, even across a kill.

A run writes every file into a hidden staging directory (``.partial-<id>``) of the
directory it writes to, and holds a lock on it while it runs (the system releases it if
the run dies). When every file is written, :meth:`Stage.commit` records the moves it is
about to make in a journal (``.commit-<id>.json``, written whole in the stage and renamed
out), makes them, removes the staging directory and, last, the journal. A journal left
behind is a commit that a kill stopped half way, and :func:`recover` (run before every read
of a dataset directory and every write into one) settles it the way its run chose:

* ``'forward'`` (files that replace others, ``save_metadata``): the journal is written only
  once every new file is complete, so the commit is finished: the files not moved yet are
  moved.
* ``'back'`` (files that are added, ``to_webdataset``): the commit counts only once its
  journal is removed, so the files it moved are removed again (those whose inode the
  journal recorded: another run's files are never touched).

A run stopped by an exception during its commit (Ctrl-C, an error) settles it itself, at
once. A ``'back'`` commit whose file another run added meanwhile is refused before anything
moves. A journal is settled only if it names plain files of its directory: a damaged or
tampered one is refused, naming it, and nothing is changed.

Commits, recovery and the making of a staging directory take turns under an exclusive
lock of the directory itself (``flock`` on it, which needs no write access), and opening a
dataset holds a shared one (:func:`reading`): a reader sees a directory before a commit or
after it, never half way, and recovery never mistakes a live run for a dead one. A staging
directory whose run still computes (another rank's, say) is left alone.

The guarantee is against the writing process dying (killed, interrupted, out of memory),
not against the machine losing power: nothing is synced to disk.

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
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator
from typing import Final, Literal, TypeAlias

__all__ = ['staging', 'Stage', 'recover', 'reading', 'FORWARD', 'BACK']

_LOG = logging.getLogger(__name__)

#: How a commit stopped half way is settled: finished (``'forward'``) or undone (``'back'``).
CommitMode: TypeAlias = Literal['forward', 'back']
FORWARD: Final = 'forward'
BACK: Final = 'back'
_STAGE_PREFIX, _JOURNAL_PREFIX, _JOURNAL_SUFFIX = '.partial-', '.commit-', '.json'
_STAGE_NAME = re.compile(r'^\.partial-[0-9a-f]{32}$')
_OWNER = '.owner'      # in a staging directory: locked by the run that writes there
_JOURNAL_TMP = '.journal'  # in a staging directory: the journal being written


@contextlib.contextmanager
def _locked(directory, shared=False):
    """Hold ``directory``'s own lock, exclusive or ``shared``. A file system without
    ``flock`` on directories (some network ones) is used without it."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        except OSError as err:  # not a lock held by another: flock is not supported here
            _LOG.debug('no lock on %s (%s): commits are not serialized there', directory, err)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def reading(directory: str) -> Iterator[None]:
    """Read ``directory`` as it is between commits: settle what a killed run left, then
    hold its shared lock (commits wait until the block ends).

    Parameters
    ----------
    directory : str
        A directory of a dataset; a path that is not one is left to the reader.
    """
    with contextlib.ExitStack() as held:
        while True:
            recover(directory)
            if not os.path.isdir(directory):
                break
            held.enter_context(_locked(directory, shared=True))
            if not any(_is_journal(name) for name in os.listdir(directory)):
                break
            held.close()  # a run was killed in its commit since: settle that first
        yield


def _is_journal(name):
    return name.startswith(_JOURNAL_PREFIX) and name.endswith(_JOURNAL_SUFFIX)


def _plain(name):
    return isinstance(name, str) and name not in ('', '.', '..') and \
        os.path.basename(name) == name and '\0' not in name


class Stage:
    """A run's staging directory in ``directory`` (made by :func:`staging`).

    Parameters
    ----------
    directory : str
        The directory the run writes to; the stage is a hidden directory inside it.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.id = uuid.uuid4().hex
        self.path = os.path.join(directory, _STAGE_PREFIX + self.id)

    def file(self, name: str) -> str:
        """The path of ``name`` in the stage."""
        return os.path.join(self.path, name)

    def commit(self, moves: Iterable[tuple[str, str]], mode: CommitMode) -> None:
        """Move staged files into the directory, all or nothing.

        Parameters
        ----------
        moves : list of (str, str)
            ``(name in the stage, name in the directory)`` per file; every file complete.
        mode : {'forward', 'back'}
            How a commit stopped half way is settled: ``'forward'`` finishes it (the files
            replace others), ``'back'`` undoes it (the files are new).

        Raises
        ------
        ValueError
            An unknown ``mode``, a name with a path in it, or (``'back'``) a file of that
            name in the directory already (another run's): nothing is moved.
        """
        if mode not in (FORWARD, BACK):
            raise ValueError("mode must be 'forward' or 'back', got %r" % (mode,))
        pairs = [list(move) for move in moves]
        bad = [move for move in pairs if len(move) != 2 or not all(map(_plain, move))]
        if bad:
            raise ValueError('commit moves must be (name, name) pairs of plain file names, '
                             'got %r' % (bad[0],))
        with _locked(self.directory):
            if mode == BACK:
                present = [target for _, target in pairs
                           if os.path.lexists(os.path.join(self.directory, target))]
                if present:
                    raise ValueError('%s already holds %s: another run wrote into it '
                                     'meanwhile; nothing of this run was moved'
                                     % (self.directory, present[0]))
            record = {'mode': mode, 'stage': os.path.basename(self.path),
                      'moves': [[source, target, os.stat(self.file(source)).st_ino]
                                for source, target in pairs]}
            journal = os.path.join(self.directory,
                                   _JOURNAL_PREFIX + self.id + _JOURNAL_SUFFIX)
            with open(self.file(_JOURNAL_TMP), 'w', encoding='utf-8') as handle:
                json.dump(record, handle)
            try:
                os.replace(self.file(_JOURNAL_TMP), journal)
                _move(self.directory, self.path, record['moves'])
                _close_commit(self.directory, journal, record)
            except BaseException:
                # stopped half way (Ctrl-C, an error): settle it now if possible, else the
                # next read or write of the directory does
                with contextlib.suppress(Exception):
                    if os.path.exists(journal):
                        _settle(self.directory, record)
                        _close_commit(self.directory, journal, record)
                raise


@contextlib.contextmanager
def staging(directory: str) -> Iterator[Stage]:
    """A :class:`Stage` in ``directory`` that a run's tasks write into, removed at the end
    whatever happens; a task still running after a failure finds it gone and writes
    nothing. :func:`recover` runs first, so what a killed run left is settled.

    Parameters
    ----------
    directory : str
        An existing directory.

    Yields
    ------
    Stage
    """
    recover(directory)
    stage = Stage(directory)
    with _locked(directory):  # made and locked before recovery can look at it
        os.mkdir(stage.path)
        owner = open(stage.file(_OWNER), 'a')
        fcntl.flock(owner, fcntl.LOCK_EX)
    with owner:
        try:
            yield stage
        finally:
            shutil.rmtree(stage.path, ignore_errors=True)


def _move(directory, stage_path, moves):
    for source, target, _ in moves:
        os.replace(os.path.join(stage_path, source), os.path.join(directory, target))


def _settle(directory, journal):
    """Finish (``'forward'``) or undo (``'back'``) the journal's commit. Safe to repeat: a
    file still staged was not moved; a moved file is known by its inode."""
    stage_path = os.path.join(directory, journal['stage'])
    if journal['mode'] == FORWARD:
        _move(directory, stage_path,
              [move for move in journal['moves']
               if os.path.lexists(os.path.join(stage_path, move[0]))])
        return
    for _, target, inode in journal['moves']:
        path = os.path.join(directory, target)
        with contextlib.suppress(FileNotFoundError):
            if os.lstat(path).st_ino == inode:
                os.remove(path)


def _close_commit(directory, journal_path, journal):
    """A settled commit's last steps: remove its staging directory, then its journal (the
    point where a ``'back'`` commit counts)."""
    shutil.rmtree(os.path.join(directory, journal['stage']), ignore_errors=True)
    os.remove(journal_path)


def _read_journal(path):
    """The journal at ``path``, checked: its stage and files are plain names of the
    directory, so settling it touches nothing outside."""
    try:
        with open(path, 'rb') as handle:
            journal = json.loads(handle.read().decode('utf-8'))
        valid = (isinstance(journal, dict) and journal.get('mode') in (FORWARD, BACK)
                 and isinstance(journal.get('stage'), str)
                 and _STAGE_NAME.match(journal['stage'])
                 and isinstance(journal.get('moves'), list)
                 and all(isinstance(move, list) and len(move) == 3 and _plain(move[0])
                         and _plain(move[1]) and isinstance(move[2], int)
                         for move in journal['moves']))
    except ValueError:
        valid = False
    if not valid:
        raise ValueError('%s is a damaged commit journal: the commit it describes cannot be '
                         'settled; check the directory by hand and remove it' % path)
    return journal


def recover(directory: str) -> None:
    """Settle the commits that killed runs left in ``directory`` and remove their staging
    directories. A directory without hidden run files (the usual case) costs one listing.

    Parameters
    ----------
    directory : str
        Any path: one that is not a directory has nothing to settle.

    Raises
    ------
    ValueError
        A journal that is not one (damaged or tampered with), naming it.
    OSError
        A commit cannot be settled (a read-only directory?); a note names its journal.
    """
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return
    if not any(name.startswith((_STAGE_PREFIX, _JOURNAL_PREFIX)) for name in names):
        return
    with _locked(directory):  # no commit is under way now, and no stage being made
        names = sorted(os.listdir(directory))
        for name in names:
            if _is_journal(name):
                _recover_journal(directory, os.path.join(directory, name))
        for name in names:
            if _STAGE_NAME.match(name):
                _remove_if_abandoned(os.path.join(directory, name))


def _recover_journal(directory, path):
    journal = _read_journal(path)
    try:
        _settle(directory, journal)
        _close_commit(directory, path, journal)
    except OSError as err:
        err.add_note('while settling the interrupted commit of %s (journal %s): open the '
                     'directory once where it can be written' % (directory, path))
        raise
    _LOG.warning('settled the interrupted commit of %s: %s', directory,
                 'its new files are in place' if journal['mode'] == FORWARD
                 else 'its files were removed (run it again)')


def _remove_if_abandoned(path):
    """Remove a staging directory whose run is gone: its owner file's lock can be taken
    (or it has none: its run died making it). One of a run still going stays."""
    try:
        handle = open(os.path.join(path, _OWNER), 'rb')
    except FileNotFoundError:
        shutil.rmtree(path, ignore_errors=True)
        return
    except OSError:
        return  # not ours to judge (another user's?)
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # its run holds the lock: still going
        shutil.rmtree(path, ignore_errors=True)
