"""loadgen's TimedSocket on a real loopback connection: a new connection's first request is
timed from connect, a later one from its sendall; reads carry the kernel's arrival time however
late the process reads; install() makes geventhttpclient's pools create them. Run in a child
process: gevent must not enter the test process (docs/loadgen.md)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's"
)

ROOT = Path(__file__).resolve().parents[2]
LATE_S = 0.1  # the gap each check tells apart: a stamp taken at the wrong event is >= this far off
SLACK_NS = 50_000_000  # half of it: room for a loaded CI box preempting a thread between two calls

SCRIPT = f"""
import json, socket, threading, time
from geventhttpclient.connectionpool import ConnectionPool
from spikelens_common.socket_clock import keep_stamping_on
from loadgen.timed_socket import TimedSocket, install, line_arrival

listener = socket.create_server(("127.0.0.1", 0))
out = {{}}

def serve():  # an OS thread with blocking stdlib sockets: the peer
    conn, _ = listener.accept()
    conn.recv(100)
    out["reply1_ns"] = time.time_ns(); conn.sendall(b"line1\\n")
    conn.recv(100)
    out["reply2_ns"] = time.time_ns(); conn.sendall(b"line2\\n")
    conn.recv(100)  # two events 5 ms apart, read late by the client: one read takes both
    conn.sendall(b"data: a\\n\\n"); time.sleep(0.005); conn.sendall(b"data: b\\n\\n")
    conn.close()

threading.Thread(target=serve, daemon=True).start()
hold = keep_stamping_on()
out["stamping_on"] = hold.on
sock = TimedSocket(socket.AF_INET, socket.SOCK_STREAM)
out["kernel_stamps"] = sock.kernel_stamps
out["connect_ns"] = time.time_ns(); sock.connect(listener.getsockname())
time.sleep({LATE_S})
sock.sendall(b"request 1")
out["sent1_ns"] = sock.sent_ns
time.sleep({LATE_S})  # the process is busy while the reply arrives
out["data1"] = sock.recv(100).decode(); out["rx1_ns"] = sock.rx_ns; out["read1_ns"] = sock.read_ns
out["send2_ns"] = time.time_ns(); sock.sendall(b"request 2")
out["sent2_ns"] = sock.sent_ns
time.sleep({LATE_S})
out["data2"] = sock.recv(100).decode(); out["rx2_ns"] = sock.rx_ns; out["read2_ns"] = sock.read_ns
out["prev2_ns"] = sock.prev_read_ns
sock.sendall(b"request 3")
out["sent3_ns"] = sock.sent_ns; out["earliest3_ns"] = sock.earliest_arrival_ns()
time.sleep({LATE_S})
both = sock.recv(100)
out["both"] = both.decode()
out["a"] = line_arrival(sock, both[len(b"data: a\\n"):])  # the parser holds b's event after a's line
out["b"] = line_arrival(sock, b"\\n")                   # ... and only b's blank line after b's
out["rx3_ns"] = sock.rx_ns
sock.close()
install()
pool = ConnectionPool("127.0.0.1", 1, "127.0.0.1", 1)
out["pool_socket"] = type(pool._create_tcp_socket(socket.AF_INET, socket.SOCK_STREAM, 0)).__name__
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def timings():
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_new_connections_request_is_timed_from_connect_a_later_one_from_its_send(timings):
    assert (
        timings["connect_ns"] <= timings["sent1_ns"] < timings["connect_ns"] + SLACK_NS
    )  # not at sendall
    assert (
        timings["send2_ns"] <= timings["sent2_ns"] < timings["send2_ns"] + SLACK_NS
    )  # not at the reply


def test_reads_carry_the_kernels_arrival_time_not_the_late_read(timings):
    if not timings["stamping_on"]:
        pytest.skip("this kernel attaches no receive stamps (arrivals fall back to read times)")
    assert (
        timings["kernel_stamps"] and timings["data1"] == "line1\n" and timings["data2"] == "line2\n"
    )
    for i in (1, 2):
        arrived, read = timings[f"rx{i}_ns"], timings[f"read{i}_ns"]
        assert timings[f"reply{i}_ns"] <= arrived < timings[f"reply{i}_ns"] + SLACK_NS
        assert read - arrived >= LATE_S * 1e9 * 0.9


def test_a_line_merged_into_a_later_packet_after_a_late_read_is_uncertain(timings):
    """The previous read bounds when a read's bytes can have arrived; a line with later bytes in
    the same read carries the later packet's stamp, so it is flagged when that window is > 1 ms."""
    assert timings["prev2_ns"] == timings["read1_ns"]
    assert (
        timings["earliest3_ns"]
        == max(timings["read2_ns"], timings["sent3_ns"])
        == timings["sent3_ns"]
    )
    assert timings["both"] == "data: a\n\ndata: b\n\n"  # one read took both events
    (a_ns, a_uncertain), (b_ns, b_uncertain) = timings["a"], timings["b"]
    assert a_ns == b_ns == timings["rx3_ns"]
    assert b_uncertain is False  # nothing after b: its stamp is its own packet's
    if timings["stamping_on"]:  # b's packet came >= 5 ms after a's, and after request 3 was sent
        assert a_uncertain is True


def test_install_makes_the_connection_pool_create_timed_sockets(timings):
    assert timings["pool_socket"] == "TimedSocket"
