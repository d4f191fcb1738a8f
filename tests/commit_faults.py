"""Stop a curation write at each of its file-system steps in turn: the driver behind
``test_shards_commit.py``, run in its own process.

``python commit_faults.py OPERATION SOURCE WORK MODE``

For k = 1, 2, ... a forked child opens a copy of the dataset, then runs OPERATION
(``save_metadata`` over ``WORK/step-k/data``, a copy of ``SOURCE``, or ``to_webdataset``
of ``SOURCE`` into ``WORK/step-k/out``) and is stopped just before its k-th step: a file
renamed, removed or opened for writing, a directory made or removed, an fsync, a parquet
written. MODE ``kill`` ends the child there (``os._exit``: no ``finally`` runs, locks are
released by the system, as after SIGKILL); ``interrupt`` raises ``KeyboardInterrupt`` there
(Ctrl-C), which the run's own clean-up handles. The first k the run completes without
reaching ends the loop; ``WORK/steps.json`` then lists, per stopped step, what it was.

The runs compute on Dask's synchronous scheduler, one step after another: the tasks may
come in another order from run to run, but each run has the same steps, and the commit's
come in the same places.
"""
import builtins
import json
import os
import shutil
import sys
import traceback

import dask
import pyarrow.parquet as pq

from gluonbatch.curation import ImageTextPairDataset

STOPPED = 86  # a child's exit code when it was stopped at its step
ID = 'key'
#: The functions a step is a call of (``shutil.rmtree`` calls ``os.unlink`` / ``os.rmdir``,
#: ``os.makedirs`` calls ``os.mkdir``).
STEPS = [(os, 'replace'), (os, 'rename'), (os, 'remove'), (os, 'unlink'), (os, 'rmdir'),
         (os, 'mkdir'), (os, 'fsync'), (pq, 'write_table')]


def save_metadata(step_dir, source):
    """The new column every run saves: ``area``."""
    data = os.path.join(step_dir, 'data')
    shutil.copytree(source, data)

    def prepare():
        ds = ImageTextPairDataset.from_webdataset(data, ID)
        ds.metadata['area'] = ds.metadata['width'] * ds.metadata['height']
        return ds.save_metadata
    return prepare


def to_webdataset(step_dir, source):
    """Records with ``score < 0.7``, 3 per output shard."""
    os.makedirs(step_dir)

    def prepare():
        ds = ImageTextPairDataset.from_webdataset(source, ID)
        ds.metadata['keep'] = ds.metadata['score'] < 0.7
        return lambda: ds.to_webdataset(os.path.join(step_dir, 'out'), 'keep',
                                        samples_per_shard=3, old_id_col='old_key')
    return prepare


def _describe(name, args):
    shown = [os.path.basename(arg) if isinstance(arg, str) else type(arg).__name__
             for arg in args[:2]]
    return '%s(%s)' % (name, ', '.join(shown))


def stop_at(number, mode):
    """Make the ``number``-th step from now on stop the process (``mode``); returns where
    the description of that step is kept."""
    seen, stopped = [0], []

    def step(name, args):
        seen[0] += 1
        if seen[0] != number:
            return
        stopped.append(_describe(name, args))
        if mode == 'kill':
            sys.stdout.write(json.dumps(stopped[0]) + '\n')
            sys.stdout.flush()
            os._exit(STOPPED)
        raise KeyboardInterrupt

    for module, name in STEPS:
        def counted(*args, _real=getattr(module, name), _name=name, **kwargs):
            step(_name, args)
            return _real(*args, **kwargs)
        setattr(module, name, counted)
    real_open = builtins.open

    def counted_open(file, mode='r', *args, **kwargs):
        if any(flag in mode for flag in 'wax+'):
            step('open', (file,))
        return real_open(file, mode, *args, **kwargs)
    builtins.open = counted_open
    return stopped


def _child(operation, step_dir, source, number, mode):
    """The run of one step; never returns."""
    code = 1
    try:
        run = operation(step_dir, source)()
        stopped = stop_at(number, mode)
        try:
            run()
            code = 0
        except KeyboardInterrupt:
            if not stopped:
                raise
            sys.stdout.write(json.dumps(stopped[0]) + '\n')
            code = STOPPED
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(operation_name, source, work, mode):
    operation = {'save_metadata': save_metadata, 'to_webdataset': to_webdataset}[operation_name]
    dask.config.set(scheduler='synchronous')
    steps = []
    number = 0
    while True:
        number += 1
        step_dir = os.path.join(work, 'step-%03d' % number)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            os.dup2(write, 1)
            _child(operation, step_dir, source, number, mode)
        os.close(write)
        with os.fdopen(read) as pipe:
            said = pipe.read()
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if code == 0:
            shutil.rmtree(step_dir)
            break
        if code != STOPPED:
            raise SystemExit('step %d: the run failed (exit code %d)' % (number, code))
        steps.append(json.loads(said.strip().splitlines()[-1]))
    with open(os.path.join(work, 'steps.json'), 'w') as handle:
        json.dump(steps, handle)


if __name__ == '__main__':
    main(*sys.argv[1:])
