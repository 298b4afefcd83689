"""Kernel receive timestamps of TCP sockets (Linux ``SO_TIMESTAMPNS``), for the server and the client.

Why: a timestamp taken in Python when data is *read* is late by however long the reader's event
loop was busy — at 64 streams on 2 shared cores, p99 76 ms for the engine server's loop (it is
streaming the other responses) and p99 19 ms for a load generator reading those streams. The
kernel stamps each packet as it arrives (for loopback, inside the sender's ``send``); ``recvmsg``
hands that stamp over with the data. Both ends of spikelens' measurement use it, so the client's
TTFT ends when the first content reached the client's socket and the server's starts when the
request reached the server's, whatever either process was doing at the time.

- ``enable(sock)``: turn the stamps on (``False`` where the OS does not offer them).
- ``recv_stamped(sock, n)``: ``(data, stamp_ns | None)``; the stamp is that of the *last* packet
  the read took (TCP merges packets in the receive buffer), so it is never earlier than the
  arrival of the data's first byte and never later than the read itself.
- ``keep_stamping_on()``: Linux switches stamping on lazily — the first socket that asks only
  queues the switch, and packets received before it happens carry no stamp — and off again when
  the last such socket closes. Held open for the process's life, the pair of sockets this returns
  keeps it on, and it returns once a packet has come back stamped.
- ``StampingSocket``: a socket whose ``recv`` keeps the stamp of its last read in ``last_ns``
  and whose ``send`` notes when its last write began; ``stamp_transport_reads`` puts one under
  an asyncio transport (see its doc for the one private attribute it relies on).

Stamps are CLOCK_REALTIME, the same clock as ``time.time_ns()``. No CPU-GPU syncs, no allocation
beyond the read itself; stdlib only (imported by the Locust process too).
"""

from __future__ import annotations

import operator
import socket
import struct
import sys
import time
from collections.abc import Callable
from functools import partial

SO_TIMESTAMPNS = 35  # Linux (asm-generic and x86): SCM_TIMESTAMPNS has the same value
_TIMESPEC = struct.Struct("@qq")  # struct timespec on 64-bit Linux: tv_sec, tv_nsec
_ANCILLARY_BYTES = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0


def enable(sock) -> bool:
    """Ask the kernel to stamp this socket's received packets. Returns whether it will."""
    if not sys.platform.startswith("linux") or not _ANCILLARY_BYTES:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def recv_stamped(sock, bufsize: int) -> tuple[bytes, int | None]:
    """One ``recvmsg``: the data and the kernel's receive time of its last packet in ns
    (``None`` when the kernel attached no stamp: stamps not enabled, or no data)."""
    data, ancillary, _flags, _addr = sock.recvmsg(bufsize, _ANCILLARY_BYTES)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(payload)
            return data, seconds * 1_000_000_000 + nanoseconds
    return data, None


class StampingHold:
    """A loopback TCP connection whose receiving end asked for stamps; ``close()`` lets go."""

    def __init__(self, sockets: list, on: bool):
        self._sockets = sockets
        self.on = on  # a probe packet came back stamped

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()


def keep_stamping_on(timeout_s: float = 1.0) -> StampingHold:
    """Switch the kernel's receive stamps on and keep them on until ``close()`` (see module doc).
    Blocks until a probe over loopback TCP comes back stamped, at most ``timeout_s``; ``on`` says
    whether it did (False where the OS has no stamps: callers fall back to read times anyway)."""
    listener = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    listener.close()
    hold = StampingHold([sender, receiver], on=False)
    if not enable(receiver):
        return hold
    receiver.settimeout(timeout_s)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        sender.sendall(b".")
        if recv_stamped(receiver, 16)[1] is not None:
            hold.on = True
            break
        time.sleep(0.002)
    return hold


class StampingSocket:
    """Wraps a socket; ``recv`` reads with ``recv_stamped`` and keeps the stamp in ``last_ns``;
    ``send`` notes the time right before the system call in ``last_send_ns`` and right after it
    returned in ``last_send_done_ns`` (a stamp taken in Python around a higher-level write can be
    milliseconds off: the write releases the GIL, and the event loop may wait for it on either
    side). On loopback the data reaches the peer's socket inside the call, so the two bound when
    it did: apart by microseconds, or by as long as the thread was preempted in the call. Everything
    else is the wrapped socket's (attribute access is delegated)."""

    def __init__(self, sock):
        self._sock = sock
        self.last_ns: int | None = None
        self.last_send_ns: int | None = None
        self.last_send_done_ns: int | None = None

    def send(self, data, flags: int = 0) -> int:
        # The clock read and the system call run back to back in C, inside one bytecode (the
        # unpacking drives ``map``): CPython may hand the GIL to another thread when a call
        # returns to the bytecode loop, so ``t = time.time_ns(); sock.send(...)`` could let the
        # engine's step thread run between the two, for up to the 5-ms switch interval. (Not
        # isolated by a measurement: the multi-ms outliers seen under load turned out to be the
        # client's merged reads, loadgen/timed_socket.py.) The GIL release inside ``send`` comes
        # after the stamp and does not wait; the stamp after it is read as the call returns.
        calls: tuple[Callable[[], int], ...] = (
            time.time_ns,
            partial(self._sock.send, data, flags),
            time.time_ns,
        )
        self.last_send_ns, sent, self.last_send_done_ns = map(operator.call, calls)
        return sent

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        if flags:
            return self._sock.recv(bufsize, flags)
        data, self.last_ns = recv_stamped(self._sock, bufsize)
        return data

    def __getattr__(self, name):
        return getattr(self._sock, name)


def stamp_transport_reads(transport) -> StampingSocket | None:
    """Make an asyncio selector transport read through a ``StampingSocket``; its ``last_ns`` is
    then the kernel time of the bytes handed to the protocol's current ``data_received``.

    Relies on CPython's ``_SelectorSocketTransport`` keeping its socket in ``_sock``, reading it
    with ``recv`` and writing with ``send`` (3.11–3.13; a test pins it). Returns ``None`` — and
    changes nothing — when the transport is of another kind (uvloop, SSL, a pipe) or the OS has no
    stamps; callers then fall back to the time of the read.
    """
    sock = getattr(transport, "_sock", None)
    if not isinstance(sock, socket.socket) or sock.type != socket.SOCK_STREAM or not enable(sock):
        return None
    stamping = StampingSocket(sock)
    transport._sock = stamping
    return stamping
