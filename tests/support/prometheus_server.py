"""A real Prometheus server (Debian's `prometheus` package) for the end-to-end tests: started on
a free port with its own storage, scraping the given targets every second."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import httpx

from engine.server.launch import free_port


def prometheus_binary() -> str | None:
    """The server binary, or None where scripts/setup-prometheus.sh could not install it."""
    return shutil.which("prometheus")


class PrometheusServer:
    def __init__(self, root: Path, targets: dict[str, str]):
        """`targets`: job name → host:port of a /metrics endpoint."""
        self.root = root
        self.targets = targets
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def _config(self) -> Path:
        jobs = "\n".join(
            f"  - job_name: {job}\n    static_configs: [{{targets: ['{target}']}}]"
            for job, target in self.targets.items()
        )
        path = self.root / "prometheus.yml"
        path.write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n"
            + jobs
            + "\n"
        )
        return path

    def start(self, timeout_s: float = 60.0) -> PrometheusServer:
        binary = prometheus_binary()
        assert binary, "prometheus not installed (scripts/setup-prometheus.sh)"
        self.proc = subprocess.Popen(
            [
                binary,
                f"--config.file={self._config()}",
                f"--storage.tsdb.path={self.root / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=open(self.root / "prometheus.log", "wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (self.root / "prometheus.log").read_text()[-3000:]
            try:
                if httpx.get(self.url + "/-/ready", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise AssertionError("Prometheus not ready in time")

    def scraped(self, job: str, timeout_s: float = 30.0) -> None:
        """Wait until `job`'s target has been scraped (its `up` is 1)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            r = httpx.get(self.url + "/api/v1/query", params={"query": f'up{{job="{job}"}}'})
            result = r.json()["data"]["result"]
            if result and result[0]["value"][1] == "1":
                return
            time.sleep(0.5)
        raise AssertionError(f"Prometheus never scraped {job}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
