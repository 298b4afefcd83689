"""A read-only static server for the reports folder (`spikelens serve`).

Why not `python -m http.server`: it lists directories, follows symlinks out of the root, and its
handler is easy to extend by accident. This one answers GET and HEAD only (405 otherwise), serves
regular files whose real path lies inside the real root (403 for `..`, encoded traversal, absolute
paths and symlinks that escape), maps a directory to its index.html (never a listing), and sends
headers that stop content sniffing and framing. Binds 127.0.0.1 by default.
"""

from __future__ import annotations

import mimetypes
import os
import posixpath
import shutil
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
    # The pages carry the same policy in a <meta>; the header also covers non-HTML files.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; font-src 'self'; connect-src 'none'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
}


class PathRefused(Exception):
    """The request names a path outside the root (the caller answers 403)."""


def _inside(root: Path, real: Path) -> bool:
    return real == root or root in real.parents


def resolve_inside(root: Path, url_path: str) -> Path | None:
    """The existing file or folder a URL path names inside `root`, or None (404).

    Raises PathRefused when the path, once percent-decoded and with symlinks resolved, is not
    under root. `root` must already be resolved. Reads no file contents.
    """
    path = unquote(urlsplit(url_path).path)
    if "\x00" in path or "\\" in path or ".." in path.split("/"):
        raise PathRefused(url_path)
    rel = posixpath.normpath("/" + path).lstrip("/")
    try:
        real = (root / rel).resolve(strict=True) if rel not in ("", ".") else root
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not _inside(root, real):
        raise PathRefused(url_path)
    return real


def make_handler(root: Path) -> type[BaseHTTPRequestHandler]:
    root = root.resolve(strict=True)

    class ReportHandler(BaseHTTPRequestHandler):
        server_version = "spikelens-reports"
        sys_version = ""

        def _refuse(self, status: HTTPStatus, extra: dict | None = None) -> None:
            body = f"{status.value} {status.phrase}\n".encode()
            self.send_response(status)
            for key, value in {**SECURITY_HEADERS, **(extra or {})}.items():
                self.send_header(key, value)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _serve(self, with_body: bool) -> None:
            try:
                target = resolve_inside(root, self.path)
            except PathRefused:
                return self._refuse(HTTPStatus.FORBIDDEN)
            if target is not None and target.is_dir():
                url = urlsplit(self.path).path
                if not url.endswith("/"):
                    # A folder asked without its slash: redirect so the page's relative links resolve.
                    return self._refuse(HTTPStatus.MOVED_PERMANENTLY, {"Location": url + "/"})
                target = target / "index.html"  # never a listing
                if not target.exists():
                    return self._refuse(HTTPStatus.NOT_FOUND)
                target = target.resolve()
                if not _inside(root, target):  # index.html a symlink leaving the root
                    return self._refuse(HTTPStatus.FORBIDDEN)
            if target is None or not target.is_file():
                return self._refuse(HTTPStatus.NOT_FOUND)
            ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
            if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
                ctype += "; charset=utf-8"
            with open(target, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                self.send_response(HTTPStatus.OK)
                for key, value in SECURITY_HEADERS.items():
                    self.send_header(key, value)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(size))
                self.end_headers()
                if with_body:
                    shutil.copyfileobj(fh, self.wfile)

        def do_GET(self) -> None:
            self._serve(with_body=True)

        def do_HEAD(self) -> None:
            self._serve(with_body=False)

        def _not_allowed(self) -> None:
            self._refuse(HTTPStatus.METHOD_NOT_ALLOWED, {"Allow": "GET, HEAD"})

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _not_allowed

        def log_message(self, format: str, *args) -> None:
            if getattr(self.server, "quiet", False):
                return
            super().log_message(format, *args)

    return ReportHandler


class ReportServer(ThreadingHTTPServer):
    """The report server; `quiet` silences its request log."""

    quiet: bool = False


def make_server(
    root: str | Path, host: str = "127.0.0.1", port: int = 8080, quiet: bool = False
) -> ReportServer:
    """A bound, not yet serving server (port 0 picks a free port: read server.server_address)."""
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"root: {str(root)!r} is not a directory")
    if not 0 <= int(port) <= 65535:
        raise ValueError(f"port: must be in [0, 65535], got {port!r}")
    server = ReportServer((host, int(port)), make_handler(root))
    server.daemon_threads = True
    server.quiet = quiet
    return server


def serve(root: str | Path, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve `root` read-only until interrupted (Ctrl-C); the caller prints where."""
    server = make_server(root, host, port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
