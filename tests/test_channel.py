"""The loader's channel to a worker: messages of any size with any number of file
descriptors, reassembled; a message its sender did not finish is dropped, its descriptors
closed."""
import os

import pytest
from hypothesis import given, settings, strategies as st

from gluonbatch.dataloader.channel import CHUNK, FDS_PER_PACKET, Reader, send, socket_pair


def open_fds():
    return len(os.listdir('/proc/self/fd'))


@settings(max_examples=15, deadline=None)
@given(size=st.sampled_from([0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7]),
       count=st.sampled_from([0, 1, FDS_PER_PACKET, FDS_PER_PACKET + 1, 2 * FDS_PER_PACKET + 3]))
def test_messages_of_any_size_and_descriptor_count_arrive_whole(size, count):
    ours, theirs = socket_pair()
    before = open_fds()
    pipes = [os.pipe() for _ in range(max(1, count // 2 + 1))]
    fds = [end for pipe in pipes for end in pipe][:count]
    payload = os.urandom(size)
    reader, got = Reader(ours), []
    sent = False
    while not got:  # a large message fills the socket: read as it is sent
        if not sent:
            import threading
            sender = threading.Thread(target=send, args=(theirs, payload, fds))
            sender.start()
            sent = True
        got = reader.available()
    sender.join()
    ((received, passed),) = got
    assert received == payload and len(passed) == count
    for fd in passed:  # each a working duplicate
        assert os.fstat(fd).st_ino in {os.fstat(end).st_ino for end in fds}
        os.close(fd)
    for pipe in pipes:
        for end in pipe:
            os.close(end)
    ours.close()
    theirs.close()
    assert open_fds() == before - 0 - 0 or open_fds() <= before


class DiesAfterFirstPacket:
    """A socket whose sender dies after its first packet."""

    def __init__(self, sock):
        self._sock, self._sent = sock, 0

    def sendmsg(self, buffers, ancillary):
        if self._sent:
            raise BrokenPipeError('the sender died')
        self._sent += 1
        return self._sock.sendmsg(buffers, ancillary)


def test_a_message_whose_sender_died_half_way_is_dropped_with_its_descriptors():
    ours, theirs = socket_pair()
    read_end, write_end = os.pipe()
    before = open_fds()
    with pytest.raises(BrokenPipeError):
        send(DiesAfterFirstPacket(theirs), b'x' * (2 * CHUNK), [read_end] * (FDS_PER_PACKET + 5))
    theirs.close()
    reader = Reader(ours)
    assert reader.available() == []  # the first packet alone is no message
    assert reader.closed and open_fds() <= before  # its descriptors were closed
    assert reader.next() is None
    ours.close()
    os.close(read_end)
    os.close(write_end)
