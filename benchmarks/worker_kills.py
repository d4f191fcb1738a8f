"""What a worker killed mid-epoch does to a run: MXNet's DataLoader vs gluonbatch's.

For ``mx.gluon.data.DataLoader`` and :class:`gluonbatch.DataLoader`, each run SIGKILLs one
worker process during the first epoch, then counts what the rest of the epoch and the
loader's teardown did: hangs, errors, processes left behind, and for gluonbatch whether
the batches were those of an uninterrupted run. A standalone script, not a case of
``python -m benchmarks``. Usage, from the repository's root::

    python -m benchmarks.worker_kills [--runs 50] [--which {mxnet,gluonbatch,both}]
                                      [--deadline 60] [--json PATH]

Notes
-----
**A run** is a fresh Python process in a session of its own (so that its whole process
group can be killed). It builds the loader over :data:`SAMPLES` float32 samples (each its
index plus noise from numpy's generator), batch size :data:`BATCH_SIZE`, shuffled,
:data:`WORKERS` worker processes, gluonbatch's ``Stack()`` as the batchify function of
both; gluonbatch's with ``seed=1``. During the epoch, right after batch ``k`` arrives, it
SIGKILLs worker ``w`` (MXNet's workers: the processes of its private
``_worker_pool._pool``; gluonbatch's: ``loader.worker_pids``). ``k`` and ``w`` come from
``random.Random(run)``: run ``i`` kills at the same point for both loaders.

**The loop** goes on to the epoch's end. It completes, raises (type and message kept), or
hangs: no end within ``--deadline`` seconds of its start. The child then interrupts itself
with an alarm, as a Ctrl-C would, and records where the loop was waiting and which
exception, if any, the loader was handling; should even that not end the loop within 15 s
more, the parent kills the run's process group. MXNet waits for a batch up to its own
``timeout`` (120 s by default), so a batch it lost counts as a hang here.

**The teardown** follows: ``del loader`` and ``gc.collect()`` for MXNet (whose ``__del__``
terminates its pool), ``loader.close()`` for gluonbatch. Then the child counts its own
child processes left, zombies included. A teardown that has not returned within
``--deadline`` seconds is a hang, and the parent kills the process group. After every run
the parent kills whatever is left of the group, so nothing outlives a run, then counts and
removes the files the run left: in its own ``TMPDIR`` (multiprocessing's ``pymp-*``
directories, say) and, in ``/dev/shm``, MXNet's shared-memory files named after one of the
run's processes (``mx_<pid>_<id>``; the child notes the pid of every worker forked, the
replacements too).

**Times** (``time.monotonic`` in the child): from the kill to the next batch delivered
(often one that had arrived before the kill), and the longest wait for a batch after the
kill, which includes loading again what a dead worker held. A run without a kill, made
first for each loader, gives its own row (its longest wait is over the batches after the
first) and, for gluonbatch, the reference stream: the SHA-256 of every batch's bytes in
order, which each run's must equal. MXNet's unseeded stream is not compared.

The table has a row per loader: runs, loop hangs, loop errors, teardown hangs, streams
identical, the two times' median and maximum over runs (ms), the child processes left
after the teardowns that returned, and the files left; what each hang and error was, and
what was left, follows it.
"""
import argparse
import collections
import contextlib
import gc
import hashlib
import json
import os
import random
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings

from gluonbatch._core.argtypes import HelpFormatter, positive_float, positive_int

__all__ = ['SAMPLES', 'BATCH_SIZE', 'WORKERS', 'SEED', 'kill_point', 'main']

#: The dataset's samples, the batch size and the worker processes of every loader.
SAMPLES, BATCH_SIZE, WORKERS = 64, 4, 2
#: Batches in the epoch.
BATCHES = SAMPLES // BATCH_SIZE
#: The seed of gluonbatch's loader.
SEED = 1
#: Seconds the parent allows a loop beyond the child's own alarm before it kills the child.
_BACKSTOP = 15.0
#: Where MXNet's shared-memory files are.
_SHM = '/dev/shm'
#: The loaders measured, as ``--which`` names them.
LOADERS = ('mxnet', 'gluonbatch')


def kill_point(run):
    """``(batch, worker)``: run ``run`` kills worker ``worker`` (its index in the loader's
    list of workers) right after batch ``batch`` arrives; never after the last batch, so a
    next batch always exists.

    >>> kill_point(0) == kill_point(0)
    True
    """
    rng = random.Random(run)
    return rng.randrange(BATCHES - 1), rng.randrange(WORKERS)


# --------------------------------------------------------------------------- the child


class _LoopHang(BaseException):
    """Raised by the alarm in a loop that went past the deadline (a BaseException, as
    KeyboardInterrupt is, so no ``except Exception`` in a loader swallows it)."""


def _on_alarm(signum, frame):
    raise _LoopHang()


def _process_table():
    """``{pid: (ppid, process group, state)}`` of every process now."""
    table = {}
    for name in os.listdir('/proc'):
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name) as handle:
                fields = handle.read().rsplit(')', 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile
            continue
        table[int(name)] = (int(fields[1]), int(fields[2]), fields[0])
    return table


def _children():
    """This process's child processes as ``'pid:state'`` (zombies included)."""
    me = os.getpid()
    return ['%d:%s' % (pid, state) for pid, (ppid, _, state) in _process_table().items()
            if ppid == me]


class _Noisy:
    """Sample ``i``: ``i`` plus noise from numpy's generator, float32, 3x8x8. Seeded loading
    draws the same noise again; unseeded workers draw whatever their state gives."""

    def __len__(self):
        return SAMPLES

    def __getitem__(self, index):
        import numpy as np
        return (np.random.uniform(size=(3, 8, 8)) + index).astype('float32')


def _make_loader(name):
    import mxnet as mx

    import gluonbatch
    dataset = mx.gluon.data.SimpleDataset(_Noisy())
    common = dict(batch_size=BATCH_SIZE, shuffle=True, batchify_fn=gluonbatch.Stack(),
                  num_workers=WORKERS)
    if name == 'mxnet':
        return mx.gluon.data.DataLoader(dataset, **common)
    return gluonbatch.DataLoader(dataset, seed=SEED, **common)


def _worker_pids(loader, name):
    if name == 'mxnet':
        return [process.pid for process in loader._worker_pool._pool]  # private: a bench
    return loader.worker_pids


def _epoch(loader, name, kill_at, victim, deadline):
    """One pass over ``loader``, the kill included; what happened, as a dict."""
    outcome = {'batches': 0, 'pids': _worker_pids(loader, name)}
    digest, killed, waits = hashlib.sha256(), None, []
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, deadline)
    try:
        asked = time.monotonic()
        for number, batch in enumerate(loader):
            arrived = time.monotonic()
            # the waits for batches after the kill (without a kill: after the first)
            if killed is not None or (kill_at < 0 and number > 0):
                waits.append((arrived - asked) * 1e3)
                outcome['longest_wait_ms'] = max(waits)
            if killed is not None:
                outcome.setdefault('kill_to_next_ms', (arrived - killed) * 1e3)
            digest.update(batch.asnumpy().tobytes())
            outcome['batches'] += 1
            if number == kill_at:
                pid = outcome['pids'][victim]
                os.kill(pid, signal.SIGKILL)
                killed, outcome['killed'] = time.monotonic(), pid
            del batch
            asked = time.monotonic()
        outcome['result'] = 'completed'
        outcome['stream'] = digest.hexdigest()
    except _LoopHang as hang:
        outcome['result'] = 'hung'
        outcome['hung_in'] = _where(hang)
        if hang.__context__ is not None:  # the alarm came while the loader handled this
            outcome['handling'] = _describe(hang.__context__)
    except Exception as error:  # what the loader raised is the measurement
        outcome['result'] = 'raised'
        outcome['error'] = _describe(error)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return outcome


def _describe(error):
    return '%s: %s' % (type(error).__name__, ' '.join(str(error).split()))


def _where(error):
    """Where ``error`` was raised: the innermost frame in MXNet's loader, multiprocessing's
    pool or gluonbatch, else the innermost frame, as ``'file.py function'``."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        if any(part in frame.filename for part in ('multiprocessing/pool', 'dataloader')):
            break
    else:
        frame = frames[-1]
    return '%s %s' % (os.path.basename(frame.filename), frame.name)


def _watch_children(threads):
    """A set that a daemon thread fills, every 10 ms, with the pids of the child processes
    the threads ``threads`` (native ids) forked: workers that die before the run ends are
    named in it too."""
    seen = set()

    def watch():
        while True:
            for tid in threads:
                try:
                    with open('/proc/self/task/%d/children' % tid) as handle:
                        seen.update(int(pid) for pid in handle.read().split())
                except OSError:  # the thread has ended
                    pass
            time.sleep(0.01)

    threading.Thread(target=watch, daemon=True).start()
    return seen


def _child(name, run, kill, deadline, report_fd):
    def report(event, **fields):
        # Straight to the descriptor: nothing buffered for a forked worker to write again.
        os.write(report_fd, (json.dumps(dict(fields, event=event)) + '\n').encode())

    kill_at, victim = kill_point(run) if kill else (-1, 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        loader = _make_loader(name)
        # The threads that fork workers: this one, and MXNet's pool's worker handler.
        forkers = [threading.main_thread().native_id]
        if name == 'mxnet':
            forkers.append(loader._worker_pool._worker_handler.native_id)
        seen = _watch_children(forkers)
        report('loop_start')
        outcome = _epoch(loader, name, kill_at, victim, deadline)
        if name == 'gluonbatch':
            outcome['restarts'] = loader.restarts
        outcome['runtime_warnings'] = sum(issubclass(w.category, RuntimeWarning)
                                          for w in caught)
    report('loop_end', kill_at=kill_at, victim=victim, seen=sorted(seen), **outcome)
    start = time.monotonic()
    if name == 'mxnet':
        del loader
        gc.collect()
    else:
        loader.close()
    report('done', teardown_s=time.monotonic() - start, children=_children(),
           seen=sorted(seen))


# --------------------------------------------------------------------------- the parent


def _shm_creator(name):
    """The pid in the name of an MXNet shared-memory file (``mx_<pid>_<id>``, hex), or
    None."""
    parts = name.split('_')
    try:
        return int(parts[1], 16) if len(parts) == 3 and parts[0] == 'mx' else None
    except ValueError:
        return None


def _group_left(group):
    """Processes of process group ``group`` still there."""
    return ['%d:%s' % (pid, state) for pid, (_, pgrp, state) in _process_table().items()
            if pgrp == group]


def _kill_group(group):
    """SIGKILL the group and wait (up to 10 s) until none of it is left; what was there."""
    left = _group_left(group)
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass
    end = time.monotonic() + 10
    while _group_left(group) and time.monotonic() < end:
        time.sleep(0.05)
    return left


def run_one(name, run, kill, deadline):
    """One run in a fresh process: the child's reports merged into one dict, with ``hang``
    (None, 'loop', 'teardown' or 'exit': the interpreter's) and ``stragglers`` (processes of the child's group left
    after it ended or was killed)."""
    scratch = tempfile.mkdtemp(prefix='worker-kills-')  # the run's TMPDIR
    shm_before = set(os.listdir(_SHM))
    read_end, write_end = os.pipe()
    command = [sys.executable, '-m', 'benchmarks.worker_kills', '--child', name, str(run),
               '--deadline', str(deadline), '--report-fd', str(write_end)]
    if not kill:
        command.append('--no-kill')
    errors = tempfile.TemporaryFile()  # a file, not a pipe: a full pipe would block the child
    child = subprocess.Popen(command, pass_fds=(write_end,), start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=errors,
                             env=dict(os.environ, TMPDIR=scratch),
                             cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.close(write_end)
    record, pending, phase = {'hang': None}, b'', 'start'
    limit = time.monotonic() + 120  # imports and the loader's start
    while phase != 'done':
        wait = limit - time.monotonic()
        if wait <= 0:
            record['hang'] = 'teardown' if phase == 'teardown' else 'loop'
            break
        ready, _, _ = select.select([read_end], [], [], min(wait, 1.0))
        if not ready:
            if child.poll() is not None and phase != 'done':
                record['died'] = child.returncode  # the child itself failed
                break
            continue
        data = os.read(read_end, 1 << 16)
        if not data:  # every holder of the pipe is gone, the child too
            if child.wait() and phase != 'done':
                record['died'] = child.returncode
            break
        pending += data
        *lines, pending = pending.split(b'\n')
        for line in lines:
            message = json.loads(line)
            phase = message.pop('event')
            record.update(message)
            if phase == 'loop_start':
                limit = time.monotonic() + deadline + _BACKSTOP
            elif phase == 'loop_end':
                phase, limit = 'teardown', time.monotonic() + deadline
    if record['hang'] is None and 'died' not in record:
        try:
            child.wait(deadline)  # after 'done' the interpreter only exits
        except subprocess.TimeoutExpired:
            record['hang'] = 'exit'
    record['stragglers'] = _kill_group(child.pid)
    child.wait()
    os.close(read_end)
    # What the run left in its TMPDIR and in /dev/shm, counted, then removed.
    record['tmp_left'] = sorted(os.listdir(scratch))
    shutil.rmtree(scratch, ignore_errors=True)
    ours = {child.pid, *record.get('pids', ()), *record.get('seen', ()),
            *(int(entry.split(':')[0]) for entry in
              record.get('children', []) + record['stragglers'])}
    record['shm_left'] = sorted(name for name in set(os.listdir(_SHM)) - shm_before
                                if _shm_creator(name) in ours)
    for name in record['shm_left']:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(_SHM, name))
    if 'died' in record:
        errors.seek(0)
        record['stderr'] = errors.read().decode(errors='replace')[-2000:]
    errors.close()
    return record


def _ms(values, fn):
    return '%.1f' % fn(values) if values else 'n/a'


def summarize(name, records, reference):
    """The table row of ``name`` and the lines telling its hangs and errors."""
    loop_hangs = sum(r.get('result') == 'hung' or r['hang'] == 'loop' for r in records)
    errors = [r for r in records if r.get('result') == 'raised']
    torn = [r for r in records if 'teardown_s' in r]
    teardown_hangs = sum(r['hang'] in ('teardown', 'exit') for r in records)
    if name == 'gluonbatch' and reference is not None:
        identical = '%d/%d' % (sum(r.get('stream') == reference for r in records),
                               len(records))
    else:
        identical = 'n/a'
    delays = [r['kill_to_next_ms'] for r in records if 'kill_to_next_ms' in r]
    waits = [r['longest_wait_ms'] for r in records if 'longest_wait_ms' in r]
    left = sum(len(r['children']) for r in torn)
    files = (sum(len(r['tmp_left']) for r in records), sum(len(r['shm_left']) for r in records))
    row = [name, len(records), loop_hangs, len(errors), teardown_hangs, identical,
           _ms(delays, statistics.median), _ms(delays, max),
           _ms(waits, statistics.median), _ms(waits, max),
           '%d (%d runs torn down)' % (left, len(torn)), '%d / %d' % files]
    notes = collections.Counter()
    for r in records:
        if 'died' in r:
            notes['child process failed (exit %s): %s' % (r['died'], r['stderr'][-300:])] += 1
        if r.get('result') == 'hung' or r['hang'] == 'loop':
            if r.get('result') == 'hung':
                how = 'in %s' % r['hung_in']
                if 'handling' in r:
                    how += ', while handling %s' % r['handling'][:200]
            else:
                how = 'the alarm did not end it: process group killed'
            notes['loop hung (%s)' % how] += 1
        if r.get('result') == 'raised':
            notes['loop raised %s' % r['error'][:300]] += 1
        if r['hang'] in ('teardown', 'exit'):
            notes['%s hung (no end within the deadline; process group killed)'
                  % ('teardown' if r['hang'] == 'teardown' else 'interpreter exit')] += 1
        if r['tmp_left'] or r['shm_left']:
            notes['files left: %d in TMPDIR (%s), %d in /dev/shm' % (
                len(r['tmp_left']), ' '.join(sorted({n.split('-')[0] for n in r['tmp_left']})),
                len(r['shm_left']))] += 1
        if r.get('children'):
            notes['children left after teardown: %s' % ' '.join(
                sorted(c.split(':')[1] for c in r['children']))] += 1
        if r['stragglers'] and not r['hang']:
            notes['processes of the run still there after it ended: %d'
                  % len(r['stragglers'])] += 1
        if r.get('result') == 'completed' and r.get('batches') != BATCHES:
            notes['completed with %d of %d batches' % (r['batches'], BATCHES)] += 1
        if name == 'gluonbatch' and r.get('result') == 'completed':
            notes['restarts %s, RuntimeWarnings %s%s' % (
                r.get('restarts'), r.get('runtime_warnings'),
                '' if r.get('restarts') else ' (the death was not seen before the epoch '
                                             'ended; close() reaped the worker)')] += 1
    return row, ['%s: %d x %s' % (name, count, note) for note, count in notes.most_common()]


HEADER = ['loader', 'runs', 'loop hangs', 'loop errors', 'teardown hangs',
          'streams identical', 'kill->next median ms', 'kill->next max ms',
          'longest wait median ms', 'longest wait max ms',
          'children left after teardown', 'files left: TMPDIR / shm']


def _table(rows):
    cells = [HEADER] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[column]) for row in cells) for column in range(len(HEADER))]
    lines = [' | '.join(cell.ljust(width) for cell, width in zip(row, widths))
             for row in cells]
    lines.insert(1, '-+-'.join('-' * width for width in widths))
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m benchmarks.worker_kills',
                                     description=__doc__.split('\n\n')[0],
                                     formatter_class=HelpFormatter)
    parser.add_argument('--runs', type=positive_int, default=50,
                        help='runs per loader, each in a fresh process')
    parser.add_argument('--which', choices=('mxnet', 'gluonbatch', 'both'), default='both',
                        help='the loaders to measure')
    parser.add_argument('--deadline', type=positive_float, default=60.0,
                        help='seconds a loop, and then a teardown, may take before it counts '
                             'as hung')
    parser.add_argument('--json', metavar='PATH',
                        help="write every run's record (the child's reports) to this file")
    # The child's side of a run (internal).
    parser.add_argument('--child', nargs=2, metavar=('LOADER', 'RUN'), help=argparse.SUPPRESS)
    parser.add_argument('--report-fd', type=int, help=argparse.SUPPRESS)
    parser.add_argument('--no-kill', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]), not args.no_kill, args.deadline,
               args.report_fd)
        return 0

    names = LOADERS if args.which == 'both' else (args.which,)
    print('%d samples 3x8x8 float32, batch %d, %d workers, Stack(); %d batches per epoch; '
          'one SIGKILL per run; deadline %g s' % (SAMPLES, BATCH_SIZE, WORKERS, BATCHES,
                                                  args.deadline), flush=True)
    rows, notes, started, raw = [], [], time.monotonic(), {}
    for name in names:
        baseline = run_one(name, -1, False, args.deadline)
        reference = baseline.get('stream')
        rows.append(summarize(name + ' (no kill)', [baseline], None)[0])
        notes += summarize(name + ' (no kill)', [baseline], None)[1]
        records = []
        for run in range(args.runs):
            records.append(run_one(name, run, True, args.deadline))
            last = records[-1]
            print('%s run %d: kill after batch %s, %s%s' % (
                name, run, last.get('kill_at'), last.get('result', 'no result'),
                ', %s hung' % last['hang'] if last['hang'] else ''),
                file=sys.stderr, flush=True)
        raw[name] = {'no kill': baseline, 'runs': records}
        row, lines = summarize(name, records, reference)
        rows.append(row)
        notes += lines
    print(_table(rows))
    print()
    for line in notes:
        print(line)
    print('\n%.0f s in all' % (time.monotonic() - started))
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump(raw, handle, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
