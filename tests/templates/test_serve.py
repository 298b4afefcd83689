"""templates/serve.py: read-only, GET/HEAD only, nothing outside the root (.., encoded, symlinks)."""

from __future__ import annotations

import http.client
import threading

import pytest

from templates.serve import make_server


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "reports"
    (root / "run1" / "static").mkdir(parents=True)
    (root / "index.html").write_text("<p>index</p>", encoding="utf-8")
    (root / "run1" / "index.html").write_text("<p>run1</p>", encoding="utf-8")
    (root / "run1" / "static" / "report.css").write_text("body{}", encoding="utf-8")
    (root / "empty").mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("do not serve", encoding="utf-8")
    (root / "leak.txt").symlink_to(secret)
    (root / "leakdir").symlink_to(tmp_path)
    (root / "inside.css").symlink_to(root / "run1" / "static" / "report.css")
    server = make_server(root, port=0, quiet=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def request(port: int, method: str, path: str) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.putrequest(method, path, skip_host=False, skip_accept_encoding=True)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def test_serves_pages_and_assets(site):
    status, headers, body = request(site, "GET", "/run1/index.html")
    assert (status, body) == (200, b"<p>run1</p>")
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert (
        request(site, "GET", "/run1/static/report.css")[1]["Content-Type"]
        == "text/css; charset=utf-8"
    )
    assert request(site, "GET", "/")[2] == b"<p>index</p>"
    assert request(site, "GET", "/run1/")[2] == b"<p>run1</p>"
    assert (
        request(site, "GET", "/inside.css")[2] == b"body{}"
    )  # a symlink that stays inside is fine


def test_folder_without_slash_redirects_and_never_lists(site):
    status, headers, _ = request(site, "GET", "/run1")
    assert status == 301 and headers["Location"] == "/run1/"
    assert request(site, "GET", "/empty/")[0] == 404
    assert request(site, "GET", "/nope.html")[0] == 404


def test_head_has_headers_but_no_body(site):
    status, headers, body = request(site, "HEAD", "/run1/index.html")
    assert (status, body) == (200, b"")
    assert headers["Content-Length"] == str(len(b"<p>run1</p>"))


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_are_refused(site, method):
    status, headers, _ = request(site, method, "/run1/index.html")
    assert status == 405 and headers["Allow"] == "GET, HEAD"


@pytest.mark.parametrize(
    "path",
    [
        "/../secret.txt",
        "/run1/../../secret.txt",
        "/%2e%2e/secret.txt",
        "/run1/%2E%2E/%2e%2e/secret.txt",
        "/..%2fsecret.txt",
        "/leak.txt",
        "/leakdir/secret.txt",
        "/run1\\..\\..\\secret.txt",
    ],
)
def test_paths_outside_the_root_are_refused(site, path):
    status, _, body = request(site, "GET", path)
    assert status == 403 and b"do not serve" not in body


def test_bad_arguments_are_named(tmp_path):
    with pytest.raises(ValueError, match="root: .* is not a directory"):
        make_server(tmp_path / "missing", port=0)
    with pytest.raises(ValueError, match=r"port: must be in \[0, 65535\]"):
        make_server(tmp_path, port=70000)
