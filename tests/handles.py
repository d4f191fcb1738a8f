"""What a loader can leave behind in a process: descriptors of pipes, sockets and /dev/shm
files, and mappings of /dev/shm files, each named so that one closed and another opened in
its place never look alike.

A leak test compares the handles a process holds after a loader's life with those it held
before: only the ones that appeared meanwhile count, so the handles earlier tests left (and
that a garbage collection may close in the middle of this one) change nothing.
"""
import gc
import os
import time

import mxnet as mx

#: Descriptors a loader makes: its pipes and sockets, and MXNet's shared-memory blocks.
_KINDS = ('pipe:', 'socket:', '/dev/shm/')


def loader_handles(pid='self'):
    """The set of pipes, sockets and /dev/shm files process ``pid`` holds: ``('fd', number,
    target, inode)`` for each descriptor, ``('map', address range, device, inode)`` for
    each mapping of a /dev/shm file."""
    handles = set()
    for fd in os.listdir('/proc/%s/fd' % pid):
        link = '/proc/%s/fd/%s' % (pid, fd)
        try:
            target = os.readlink(link)
            if target.startswith(_KINDS):
                handles.add(('fd', int(fd), target, os.stat(link).st_ino))
        except OSError:  # closed meanwhile (the listing's own descriptor, for one)
            pass
    with open('/proc/%s/maps' % pid) as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].startswith('/dev/shm/'):
                handles.add(('map', fields[0], fields[3], int(fields[4])))
    return handles


def left_behind(before, pid='self', deadline=60):
    """The handles of :func:`loader_handles` that ``pid`` holds and did not hold ``before``,
    once they are gone or ``deadline`` seconds have passed (MXNet frees on its engine, and
    a thread drops its last batch only when it next runs: the frees are waited for)."""
    give_up = time.monotonic() + deadline
    while True:
        gc.collect()
        mx.nd.waitall()
        left = loader_handles(pid) - before
        if not left or time.monotonic() > give_up:
            return left
        time.sleep(0.02)  # polled: the other threads run meanwhile
