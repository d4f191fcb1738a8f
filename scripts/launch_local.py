#!/usr/bin/env python
"""Run an MXNet distributed-kvstore job on this machine, on 127.0.0.1 only.

Starts MXNet's parameter-server processes the way ``tools/launch.py`` does, with the
``DMLC_*`` environment variables: 1 scheduler, ``--num-servers`` servers and
``--num-workers`` workers, all running the same command. In a scheduler or server process
``import mxnet`` runs the server loop and exits when the workers finish; in a worker
``mx.kv.create('dist_sync')`` connects to them.

::

    python scripts/launch_local.py --num-workers 2 -- python scripts/dist_train.py --steps 4

Ports are free ones on 127.0.0.1. Every process runs in its own process group and its
output is prefixed with its role. When a process fails (exits non-zero, or the workers
and the scheduler/servers do not finish within ``--grace`` seconds of each other), the others are stopped (SIGTERM, then SIGKILL)
and the launcher exits with that status; after ``--timeout`` seconds everything is
stopped and it exits with 124. It returns 0 when every worker, server and the scheduler
exited with 0.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

HOST = '127.0.0.1'
TIMEOUT_EXIT = 124


def free_port():
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _log(message):
    print('launch_local: %s' % message, file=sys.stderr, flush=True)


def _relay(stream, prefix, out):
    """Copy a child's output line by line, prefixed with its role."""
    for line in iter(stream.readline, b''):
        out.buffer.write(prefix + line)
        out.flush()
    stream.close()


class Job:
    """The scheduler, servers and workers of one run."""

    def __init__(self, command, num_workers, num_servers, extra_env=None):
        self.command = command
        self.num_workers, self.num_servers = num_workers, num_servers
        self.port = free_port()
        self.extra_env = dict(extra_env or {})
        self.procs = []    # (role, process)
        self.threads = []

    def env(self, role, index):
        env = dict(os.environ)
        env.update(self.extra_env)
        env.update({
            'DMLC_ROLE': role,
            'DMLC_PS_ROOT_URI': HOST,
            'DMLC_PS_ROOT_PORT': str(self.port),
            'DMLC_NODE_HOST': HOST,       # every node binds and announces 127.0.0.1
            'DMLC_NUM_SERVER': str(self.num_servers),
            'DMLC_NUM_WORKER': str(self.num_workers),
            'GLUONBATCH_LAUNCH_INDEX': str(index),
            'PYTHONUNBUFFERED': '1',
        })
        if role != 'scheduler':
            env['DMLC_PORT'] = str(free_port())
        return env

    def start(self):
        roles = ([('scheduler', 0)] + [('server', i) for i in range(self.num_servers)]
                 + [('worker', i) for i in range(self.num_workers)])
        for role, index in roles:
            name = role if role == 'scheduler' else '%s%d' % (role, index)
            proc = subprocess.Popen(self.command, env=self.env(role, index),
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
            _log('started %s pid %d' % (name, proc.pid))
            thread = threading.Thread(target=_relay, args=(
                proc.stdout, ('[%s] ' % name).encode(), sys.stdout), daemon=True)
            thread.start()
            self.procs.append((name, proc))
            self.threads.append(thread)

    def workers(self):
        return [(name, proc) for name, proc in self.procs if name.startswith('worker')]

    def wait(self, timeout, grace):
        """Exit status of the job: 0, the first failing status, or TIMEOUT_EXIT."""
        deadline = time.monotonic() + timeout
        workers_done_at = servers_done_at = None
        while True:
            for name, proc in self.procs:
                code = proc.poll()
                if code is not None and code != 0:
                    _log('%s (pid %d) exited with status %d; stopping the others'
                         % (name, proc.pid, code))
                    return code if code > 0 else 128 - code
            now = time.monotonic()
            if all(proc.poll() == 0 for _, proc in self.procs):
                return 0
            workers_running = any(p.poll() is None for _, p in self.workers())
            if not workers_running and workers_done_at is None:
                workers_done_at = now
            if workers_running and servers_done_at is None and any(
                    proc.poll() == 0 for name, proc in self.procs
                    if not name.startswith('worker')):
                servers_done_at = now
            if servers_done_at is not None and workers_running and \
                    now > servers_done_at + grace:
                _log('the scheduler or a server exited but workers still run after %g s; '
                     'stopping them' % grace)
                return 1
            if workers_done_at is not None and now > workers_done_at + grace:
                lingering = [name for name, proc in self.procs if proc.poll() is None]
                _log('the workers finished but %s did not exit within %g s'
                     % (', '.join(lingering), grace))
                return 1
            if now > deadline:
                _log('timed out after %g s; stopping everything' % timeout)
                return TIMEOUT_EXIT
            time.sleep(0.05)

    def stop(self, grace=3.0):
        """Stop every process group that is still running: SIGTERM, then SIGKILL."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            alive = [(name, proc) for name, proc in self.procs if proc.poll() is None]
            for name, proc in alive:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            end = time.monotonic() + wait
            while alive and time.monotonic() < end:
                alive = [(n, p) for n, p in alive if p.poll() is None]
                time.sleep(0.05)
        for _, proc in self.procs:  # groups may hold grandchildren: kill those too
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        for thread in self.threads:
            thread.join(timeout=2)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                     usage='%(prog)s [options] -- command ...',
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument('--num-workers', type=int, default=2,
                        help='worker processes, each running the command')
    parser.add_argument('--num-servers', type=int, default=1, help='parameter servers')
    parser.add_argument('--timeout', type=float, default=300,
                        help='seconds before everything is stopped (exit 124)')
    parser.add_argument('--grace', type=float, default=15,
                        help='seconds the scheduler and servers get to exit after the '
                             'workers finished')
    parser.add_argument('--env', action='append', default=[], metavar='NAME=VALUE',
                        help='extra environment variable for every process')
    parser.add_argument('command', nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ['--'] else args.command
    if not command:
        parser.error('give the command to run after --')
    if args.num_workers < 1 or args.num_servers < 1:
        parser.error('--num-workers and --num-servers must be at least 1')
    extra = {}
    for item in args.env:
        name, sep, value = item.partition('=')
        if not sep or not name:
            parser.error('--env takes NAME=VALUE, got %r' % item)
        extra[name] = value

    job = Job(command, args.num_workers, args.num_servers, extra)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    status = 1
    try:
        job.start()
        status = job.wait(args.timeout, args.grace)
    except KeyboardInterrupt:
        _log('interrupted; stopping everything')
        status = 130
    finally:
        job.stop()
        signal.signal(signal.SIGTERM, previous)
    _log('exit status %d' % status)
    return status


if __name__ == '__main__':
    sys.exit(main())
