"""Kernel receive stamps on real TCP loopback sockets: the stamp is when the bytes arrived, not
when a busy reader got round to them; an asyncio transport reads through them; anything that is
not a plain socket transport is left alone."""

import asyncio
import socket
import sys
import time

import pytest

from spikelens_common.socket_clock import (
    StampingSocket,
    enable,
    keep_stamping_on,
    recv_stamped,
    stamp_transport_reads,
)

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's"
)

LATE_S = 0.1  # how long the reader stays busy after the bytes arrived
SLACK_NS = 50_000_000  # half of LATE_S: room for a loaded CI box preempting the test between calls


@pytest.fixture(scope="module", autouse=True)
def stamping_on():
    hold = keep_stamping_on()
    if (
        not hold.on
    ):  # a sandboxed kernel without SO_TIMESTAMPNS: the product falls back to read times
        hold.close()
        pytest.skip("this kernel attaches no receive stamps")
    yield
    hold.close()


@pytest.fixture
def connected():
    """(client, server-side) sockets of one loopback TCP connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    yield client, server
    client.close()
    server.close()


def test_the_stamp_is_the_arrival_not_the_read(connected):
    client, server = connected
    assert enable(server)
    before = time.time_ns()
    client.sendall(b"hello")
    after = time.time_ns()
    time.sleep(LATE_S)  # the reader is busy
    data, stamp = recv_stamped(server, 1024)
    read = time.time_ns()
    assert data == b"hello"
    assert before <= stamp <= after + SLACK_NS  # at the send (loopback delivers inside sendall)
    assert read - stamp >= LATE_S * 1e9 * 0.9


def test_no_stamp_without_enable(connected):
    client, server = connected
    client.sendall(b"x")
    assert recv_stamped(server, 16) == (b"x", None)


def test_a_stamping_socket_keeps_the_last_reads_stamp_and_delegates_the_rest(connected):
    client, server = connected
    enable(server)
    wrapped = StampingSocket(server)
    client.sendall(b"one")
    t_sent = time.time_ns()
    time.sleep(LATE_S)
    assert wrapped.recv(16) == b"one"
    assert abs(wrapped.last_ns - t_sent) < SLACK_NS
    assert wrapped.fileno() == server.fileno() and wrapped.getsockname() == server.getsockname()


def test_an_asyncio_protocol_sees_when_the_bytes_arrived_although_its_loop_was_busy_and_when_its_write_began():
    seen = []

    class Probe(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport
            self.stamps = stamp_transport_reads(transport)

        def data_received(self, data):
            seen.append((data, self.stamps.last_ns, time.time_ns()))
            before = time.time_ns()
            self.transport.write(b"HTTP/1.1 204 No Content\r\n\r\n")  # asyncio writes through send
            returned = self.stamps.last_send_done_ns
            seen.append((before, self.stamps.last_send_ns, returned, time.time_ns()))

    async def main():
        server = await asyncio.get_running_loop().create_server(Probe, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        await asyncio.sleep(0.05)  # accepted, protocol made
        t_sent = time.time_ns()
        client.sendall(b"GET / HTTP/1.1\r\n\r\n")
        time.sleep(LATE_S)  # blocks the event loop: the read comes late
        await asyncio.sleep(0.05)
        client.close()
        server.close()
        return t_sent

    t_sent = asyncio.run(main())
    [(data, stamp, read), (before_write, write_began, write_returned, after_write)] = seen
    assert data.startswith(b"GET")
    assert abs(stamp - t_sent) < SLACK_NS and read - stamp >= LATE_S * 1e9 * 0.9
    assert before_write <= write_began <= write_returned <= after_write


def test_other_transports_are_left_alone():
    class NotASocketTransport:
        _sock = object()

    assert stamp_transport_reads(NotASocketTransport()) is None
    assert stamp_transport_reads(object()) is None
