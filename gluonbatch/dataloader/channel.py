"""Messages between the loader and one worker process, file descriptors included.

A channel is one end of a Unix ``SOCK_SEQPACKET`` socket pair: the kernel keeps packet
boundaries, and file descriptors travel inside a packet (``SCM_RIGHTS``), held by the
kernel until read. A message is a byte payload plus descriptors, sent as packets of at
most :data:`CHUNK` bytes and :data:`FDS_PER_PACKET` descriptors, the first led by a header
giving the payload's length and the number of descriptors.

:class:`Reader` reassembles messages. It never blocks unless asked to, so a sender that
stops mid-message cannot stall the reader, and a sender that dies mid-message leaves only
a partial message, which :meth:`Reader.drop_partial` discards (closing its descriptors).

Examples
--------
>>> import os
>>> ours, theirs = socket_pair()
>>> read_end, write_end = os.pipe()
>>> send(theirs, b'hello', [write_end])
>>> [(payload, len(fds)) for payload, fds in Reader(ours).available()]
[(b'hello', 1)]
"""
import array
import os
import socket
import struct
import weakref
from collections.abc import Iterable

from .._core.pickling import close_fds

__all__ = ['CHUNK', 'FDS_PER_PACKET', 'socket_pair', 'send', 'Reader',
           'close_inherited']

#: Payload bytes per packet: well below the socket's default send buffer.
CHUNK = 1 << 16
#: Descriptors per packet: below the kernel's limit of 253 per message.
FDS_PER_PACKET = 250
_HEADER = struct.Struct('<QI')
_FD_BYTES = array.array('i').itemsize
_EMPTY = object()  # no packet waiting
# The loader's end of every channel this process opened (a worker closes them all).
_loader_ends: weakref.WeakSet[socket.socket] = weakref.WeakSet()


def socket_pair() -> tuple[socket.socket, socket.socket]:
    """A connected pair of ``SOCK_SEQPACKET`` Unix sockets: the loader's end and the
    worker's. The loader's ends are noted, for :func:`close_inherited`."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    _loader_ends.add(ours)
    return ours, theirs


def close_inherited() -> None:
    """In a forked child: close the loader's ends of every channel, inherited with the
    fork. Only the loader may hold them, so that a worker sees its own channel close (end
    of file) when the loader closes it or dies. Runs in every child forked (``os.fork``,
    MXNet's own loader's workers too)."""
    for sock in list(_loader_ends):
        sock.close()
    _loader_ends.clear()


os.register_at_fork(after_in_child=close_inherited)


def send(sock: socket.socket, payload: bytes, fds: Iterable[int] = ()) -> None:
    """Send ``payload`` with the descriptors ``fds`` (still the caller's to close: the
    kernel holds its own reference to each until the message is read).

    Raises ``OSError`` (``BrokenPipeError``, ``ConnectionResetError``) once the other end
    is closed.
    """
    view, fds = memoryview(payload), list(fds)
    packets = max(1, -(-len(view) // CHUNK), -(-len(fds) // FDS_PER_PACKET))
    for number in range(packets):
        part = view[number * CHUNK:(number + 1) * CHUNK]
        passed = fds[number * FDS_PER_PACKET:(number + 1) * FDS_PER_PACKET]
        buffers: list[bytes | memoryview] = ([_HEADER.pack(len(view), len(fds)), part]
                                             if number == 0 else [part])
        ancillary = ([(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', passed))]
                     if passed else [])
        sock.sendmsg(buffers, ancillary)


class Reader:
    """Reassembles the messages arriving at ``sock``.

    Parameters
    ----------
    sock : socket.socket
        One end of a :func:`socket_pair`.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._partial = None  # [payload length, fd count, chunks, fds] of a message begun
        self.closed = False  # the other end closed (or died), and every message was read

    def available(self) -> list[tuple[bytes, list[int]]]:
        """The messages complete now, as ``(payload, fds)``; never blocks."""
        messages = []
        while not self.closed:
            message = self._packet(socket.MSG_DONTWAIT)
            if message is _EMPTY:
                break
            if message is not None:
                messages.append(message)
        return messages

    def next(self) -> tuple[bytes, list[int]] | None:
        """The next message, ``(payload, fds)``, waiting for it; None once the other end
        is closed (a partial message is dropped then)."""
        while not self.closed:
            message = self._packet(0)
            if message is not None:
                return message
        return None

    def _packet(self, flags):
        """Read one packet: the message it completes, None, or ``_EMPTY`` if none waits."""
        try:
            data, ancillary, flags, _ = self._sock.recvmsg(
                CHUNK + _HEADER.size, socket.CMSG_SPACE(FDS_PER_PACKET * _FD_BYTES), flags)
        except BlockingIOError:
            return _EMPTY
        except ConnectionResetError:
            # A peer that died with messages unread reports it once; what it sent before
            # is still queued, and the end of the channel follows it.
            return None
        fds = _descriptors(ancillary)
        if flags & socket.MSG_CTRUNC:  # the kernel dropped descriptors this process had no room for
            close_fds(fds)
            self.drop_partial()
            raise OSError('a message arrived without some of its file descriptors: this process '
                          'has too many open files (raise the limit: ulimit -n)')
        if not data and not fds:  # the other end is gone
            self.closed = True
            self.drop_partial()
            return None
        if self._partial is None:
            length, count = _HEADER.unpack_from(data)
            self._partial = [length, count, [data[_HEADER.size:]], fds]
        else:
            self._partial[2].append(data)
            self._partial[3].extend(fds)
        length, count, chunks, got = self._partial
        if sum(map(len, chunks)) < length or len(got) < count:
            return None
        self._partial = None
        return b''.join(chunks), got

    def drop_partial(self) -> None:
        """Discard a message begun and not finished (its sender died), closing its
        descriptors."""
        if self._partial is not None:
            close_fds(self._partial[3])
            self._partial = None


def _descriptors(ancillary):
    fds = array.array('i')
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % _FD_BYTES])
    return list(fds)

