"""The load generator's sockets, stamped where the bytes are (Locust process only).

Why: at 64 streams on 2 cores a time taken in Python is off twice over. The send: between the
moment a user decides to send and geventhttpclient's ``sendall`` the greenlet gives way to others
(somewhere in Locust's request path or the connection pool: a greenlet-switch trace saw the first
switch 0.18 ms after that stamp), and ``sendall`` came p50 3 ms / p99 35 ms after it. The receive:
a chunk is read only when the gevent hub gets round to its greenlet, behind every other stream's
chunks of the same engine step: p99 19 ms after the kernel had it. Both errors are the client's,
and they make TTFT and every ITL gap the client's latency rather than the server's. So each
connection is a ``TimedSocket``:

- ``sent_ns``: taken inside ``sendall``, right before the request's first byte is written
  (the first send after the socket last received data: one request on a keep-alive connection);
  for the first request of a new connection, when ``connect`` began, so TTFT holds the TCP
  handshake as it does in vLLM's ``bench serve``, but not the wait for a pooled connection;
- ``rx_ns``: the kernel's receive time of the last packet the latest ``recv`` took
  (``SO_TIMESTAMPNS``, see ``spikelens_common.socket_clock``); ``read_ns`` the time of that read.
  A line the parser returns ends in the bytes of the latest ``recv`` or of an earlier one whose
  stamp is still current (no read happened since), so ``rx_ns`` right after ``readline`` is
  when the line's last byte arrived — never earlier, and never later than the read. If bytes
  after the line came in the same read, the kernel may have merged the line's packet into a
  later one and kept only the later receive time: the line then arrived somewhere after
  ``earliest_arrival_ns()`` (the previous read's time: anything queued by then came with it)
  and by ``rx_ns``.

``install()`` makes geventhttpclient's connection pools create ``TimedSocket``s (the pool's own
``_create_tcp_socket`` hook; TLS connections wrap the socket and keep read-time stamps, which the
run records). Where the OS has no receive stamps, ``rx_ns`` falls back to ``read_ns``.
"""

from __future__ import annotations

import time

import gevent.socket
from geventhttpclient.connectionpool import ConnectionPool

from spikelens_common.socket_clock import StampingHold, enable, keep_stamping_on, recv_stamped

_HOLD: list[StampingHold] = []  # install()'s hold on the kernel's stamping, for the process's life


# A line merged into a later packet is timed to within its arrival window (earliest_arrival_ns()
# to rx_ns); up to this wide it is as good as exact for a 2-ms agreement check (half of it).
MERGED_TOLERANCE_NS = 1_000_000


class TimedSocket(gevent.socket.socket):
    """A gevent socket that stamps its request sends and its reads (see the module doc)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kernel_stamps = enable(self)  # whether rx_ns is the kernel's time
        self.sent_ns: int | None = None
        self.rx_ns: int | None = None
        self.read_ns: int | None = None
        self.prev_read_ns: int | None = None  # the read before the latest one
        self.rx_stamped = False  # rx_ns of the latest read is the kernel's (else the read time)
        self._receiving = True  # the next send starts a new request

    def connect(self, address):
        self.sent_ns = time.time_ns()
        self._receiving = False  # the request sent next on this connection began here
        return super().connect(address)

    def sendall(self, data, flags=0):
        if self._receiving:
            self.sent_ns = time.time_ns()
            self._receiving = False
        return super().sendall(data, flags)

    def recv(self, bufsize, flags=0):
        if flags or not self.kernel_stamps:
            data, stamp = super().recv(bufsize, flags), None
        else:
            data, stamp = recv_stamped(self, bufsize)  # gevent's recvmsg: waits cooperatively
        self.prev_read_ns, self.read_ns = self.read_ns, time.time_ns()
        self.rx_stamped = stamp is not None
        self.rx_ns = stamp if stamp is not None else self.read_ns
        self._receiving = True
        return data

    def earliest_arrival_ns(self) -> int | None:
        """The earliest the latest read's bytes can have reached the socket: after the previous
        read (which took everything queued by then) and after this request was sent."""
        bounds = [t for t in (self.prev_read_ns, self.sent_ns) if t is not None]
        return max(bounds) if bounds else None


def line_arrival(sock: TimedSocket, rest: bytes | bytearray) -> tuple[int, bool]:
    """(arrival_ns, uncertain) of the line a parser just returned from ``sock``'s reads, given the
    bytes the parser still holds from them (``rest``: at most the line's event terminator when
    nothing else came with it). Uncertain: later bytes came in the same read, so the stamp may be
    a later packet's, and the window back to ``earliest_arrival_ns()`` is wider than
    MERGED_TOLERANCE_NS."""
    rx_ns = sock.rx_ns
    if rx_ns is None:
        raise RuntimeError("line_arrival before any read of the socket")
    if len(rest) <= 2 and not bytes(rest).strip(
        b"\r\n"
    ):  # nothing past the line's event: its own stamp
        return rx_ns, False
    earliest = sock.earliest_arrival_ns()  # only for merged lines (this runs for every stream line)
    return rx_ns, earliest is None or rx_ns - earliest > MERGED_TOLERANCE_NS


def _create_timed_socket(
    pool: ConnectionPool, family: int, socktype: int, protocol: int
) -> TimedSocket:
    return TimedSocket(family, socktype, protocol)


def install() -> None:
    """Every connection geventhttpclient opens from now on, in this process, is a TimedSocket,
    and the kernel stamps packets from the first one on (``keep_stamping_on``)."""
    if not _HOLD:
        _HOLD.append(keep_stamping_on())
    # geventhttpclient has no hook for its socket factory: the method is replaced on the class
    ConnectionPool._create_tcp_socket = _create_timed_socket  # type: ignore[method-assign,assignment]


def timed_socket_of(response) -> TimedSocket | None:
    """The TimedSocket under a Locust FastResponse still reading its body, else None."""
    raw = getattr(response, "_response", None)  # geventhttpclient's HTTPSocketPoolResponse
    sock = getattr(raw, "_sock", None)
    return sock if isinstance(sock, TimedSocket) else None
