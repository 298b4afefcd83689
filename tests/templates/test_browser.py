"""The reports in a real headless Chromium: from file:// and through templates/serve.py.

Checks what a reader would hit: console errors (CSP violations included), charts that did not
draw, links that lead nowhere, markup from a hostile run that executes. Saves screenshots under
the test's tmp dir and prints their paths. Skips, saying why, when Debian's chromium or
chromedriver is missing (scripts/setup-browser.sh installs them).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from flows.tasks import rebuild_index
from templates.render import render_evaluation, render_incident, render_nightly, render_sweep
from templates.serve import make_server

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
CHROME_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1366,900",
)


def _start_chrome(profile: Path, *extra_flags: str):
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip(
            f"needs {CHROMIUM} and {CHROMEDRIVER} (Debian chromium, chromium-driver; "
            "scripts/setup-browser.sh installs them)"
        )
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in CHROME_FLAGS + extra_flags:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")  # a fresh profile per browser
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(60)
    return driver


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = _start_chrome(tmp_path_factory.mktemp("chrome-profile"))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def reports(tmp_path_factory, all_contexts, typed):
    """A reports folder as the flows lay it out: index.html + one folder per run."""
    root = tmp_path_factory.mktemp("reports")
    all_contexts["nightly"]["incident_href"] = "../gc-storm/index.html"
    all_contexts["evaluation"]["cases"][0]["href"] = "../gc-storm/index.html"
    pages = {
        "gc-storm": (render_incident, "incident"),
        "evil": (render_incident, "hostile"),
        "nightly": (render_nightly, "nightly"),
        "sweep": (render_sweep, "sweep"),
        "evaluation": (render_evaluation, "evaluation"),
    }
    for folder, (render, context) in pages.items():
        render(typed(context, all_contexts[context]), root / folder, index_href="../index.html")
    rebuild_index(root)  # the index from the report.json each render left
    return root


@pytest.fixture(scope="module")
def server_url(reports):
    server = make_server(reports, port=0, quiet=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


PAGES = [
    "index.html",
    "gc-storm/index.html",
    "nightly/index.html",
    "sweep/index.html",
    "evaluation/index.html",
    "evil/index.html",
]

WAIT_FOR_CHARTS = """
const plots = Array.from(document.querySelectorAll('.plot'));
return plots.every(p => p.querySelector('svg.main-svg') !== null);
"""
CHART_STATE = """
const out = [];
document.querySelectorAll('.plot').forEach(p => {
  const svg = p.querySelector('svg.main-svg');
  const r = p.getBoundingClientRect();
  out.push({id: p.id, kind: 'plotly', height: r.height,
            marks: p.querySelectorAll('g.trace, g.hm, image, path.point, g.heatmaplayer > *').length});
});
document.querySelectorAll('svg.timeline').forEach(s => {
  const r = s.getBoundingClientRect();
  out.push({id: 'svg-timeline', kind: 'svg', height: r.height,
            marks: Array.from(s.querySelectorAll('path.line')).filter(p => p.getTotalLength() > 0).length});
});
return out;
"""


def _page_url(base: str, page: str) -> str:
    return urllib.parse.urljoin(base, page)


def _open(browser, url: str) -> list[dict]:
    """Load url, wait for every chart, return the console messages of the load."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get_log("browser")  # drop messages of the previous page
    browser.get(url)
    WebDriverWait(browser, 60).until(lambda d: d.execute_script(WAIT_FOR_CHARTS))
    return browser.get_log("browser")


def _link_resolves(page_url: str, href: str, ids: set[str]) -> bool:
    target = urllib.parse.urljoin(page_url, href)
    parts = urllib.parse.urlsplit(target)
    if parts.fragment and target.split("#")[0] == page_url.split("#")[0]:
        return parts.fragment in ids
    if parts.scheme == "file":
        return Path(urllib.parse.unquote(parts.path)).is_file()
    try:
        with urllib.request.urlopen(
            urllib.request.Request(target, method="HEAD"), timeout=10
        ) as resp:
            return resp.status == 200
    except urllib.error.URLError:
        return False


def _check_page(browser, url: str) -> None:
    logs = _open(browser, url)
    errors = [e for e in logs if e["level"] in ("SEVERE", "ERROR")]
    assert not errors, f"console errors on {url}: {errors}"
    charts = browser.execute_script(CHART_STATE)
    expected = browser.execute_script(
        "return document.querySelectorAll('.plot, svg.timeline').length"
    )
    assert len(charts) == expected
    for chart in charts:
        assert chart["height"] > 50 and chart["marks"] > 0, f"{url}: chart not drawn: {chart}"
    ids = set(
        browser.execute_script(
            "return Array.from(document.querySelectorAll('[id]')).map(e => e.id)"
        )
    )
    hrefs = browser.execute_script(
        "return Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))"
    )
    dead = [h for h in hrefs if not _link_resolves(browser.current_url, h, ids)]
    assert not dead, f"{url}: links that do not resolve: {dead}"


@pytest.mark.parametrize("page", PAGES)
def test_pages_from_file_urls(browser, reports, page):
    _check_page(browser, (reports / page).as_uri())


@pytest.mark.parametrize("page", PAGES)
def test_pages_through_the_server(browser, server_url, page):
    _check_page(browser, _page_url(server_url, page))


def test_a_real_reports_folder(browser):
    """SPIKELENS_REPORTS_DIR=<reports folder> (e.g. after `spikelens demo`): check every page in it."""
    folder = os.environ.get("SPIKELENS_REPORTS_DIR")
    if not folder:
        pytest.skip(
            "set SPIKELENS_REPORTS_DIR to a reports folder (e.g. .spikelens/reports after the demo)"
        )
    pages = sorted(Path(folder).resolve().rglob("index.html"))
    assert pages, f"no index.html under {folder}"
    server = make_server(folder, port=0, quiet=True)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        for page in pages:
            _check_page(browser, page.as_uri())
            _check_page(
                browser, _page_url(base, page.relative_to(Path(folder).resolve()).as_posix())
            )
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_hostile_run_executes_nothing(browser, reports):
    from selenium.common.exceptions import NoAlertPresentException

    _open(browser, (reports / "evil" / "index.html").as_uri())
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018  (reading it is the check)
    assert browser.execute_script("return document.images.length") == 0
    headline = browser.execute_script("return document.getElementById('headline').textContent")
    assert "<script>alert(1)</script>" in headline


def test_index_sorts_and_filters(browser, reports):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    _open(browser, (reports / "index.html").as_uri())
    visible = "return Array.from(document.querySelectorAll('tr.run-row')).filter(r => !r.hidden).map(r => r.dataset.kind)"
    browser.find_element(By.CSS_SELECTOR, "th[data-key=kind] button").click()
    assert browser.execute_script(visible) == sorted(browser.execute_script(visible))
    browser.find_element(By.ID, "filter-text").send_keys("sweep")
    assert browser.execute_script(visible) == ["sweep"]
    browser.find_element(By.ID, "filter-text").clear()
    Select(browser.find_element(By.ID, "filter-kind")).select_by_value("incident")
    browser.find_element(By.ID, "filter-text").send_keys(" ")  # clear() fires no input event
    assert browser.execute_script(visible) == ["incident", "incident"]


def test_first_screen_screenshots(browser, reports, tmp_path):
    """Screenshots of the incident report and the index (1366×900), for a person to look at."""
    for page, name in (
        ("gc-storm/index.html", "incident.png"),
        ("index.html", "index.png"),
        ("nightly/index.html", "nightly.png"),
        ("sweep/index.html", "sweep.png"),
        ("evaluation/index.html", "evaluation.png"),
    ):
        _open(browser, (reports / page).as_uri())
        path = tmp_path / name
        assert browser.save_screenshot(str(path)) and path.stat().st_size > 10_000
        print(f"screenshot: {path}")
        shutil.copyfile(path, reports / name)  # beside the pages, for the full-page look


def test_incident_reads_with_javascript_off(reports, tmp_path):
    """JS off: the SVG timeline and the <noscript> figure tables stand in for the Plotly charts."""
    driver = _start_chrome(tmp_path / "profile", "--blink-settings=scriptEnabled=false")
    try:
        driver.get((reports / "gc-storm" / "index.html").as_uri())
        state = driver.find_element("css selector", "svg.timeline").size
        assert state["height"] > 100
        assert len(driver.find_elements("css selector", "svg.timeline path.line")) == 4
        summaries = driver.find_elements("css selector", "table.chart-summary")
        assert summaries and all(t.is_displayed() for t in summaries)
        assert not driver.find_elements("css selector", ".plot svg")  # Plotly did not run
        assert "ITL p99 rose from 45 ms to 255 ms" in driver.find_element("id", "headline").text
        path = tmp_path / "incident-no-js.png"
        driver.save_screenshot(str(path))
        print(f"screenshot: {path}")
    finally:
        driver.quit()


def _hour_long(incident: dict) -> dict:
    """The incident context of a one-hour run as build_incident_context gives it: 3,600 one-second
    windows (a 12-s spike at 30:00), steps already downsampled to pages.incident.MAX_STEPS."""
    import copy

    from pages.incident import MAX_STEPS

    data = copy.deepcopy(incident)
    windows = []
    for t in range(3600):
        in_spike = 1800 <= t < 1812
        windows.append(
            {
                "t_s": float(t),
                "itl_p50_ms": 21.0 + (t % 7) * 0.3 + (9.0 if in_spike else 0.0),
                "itl_p99_ms": 255.0 if t == 1805 else (150.0 if in_spike else 45.0 + t % 5),
                "ttft_p99_ms": 180.0 + t % 11,
                "e2e_p99_ms": 1550.0 + t % 13,
                "requests": 14 + t % 3,
                "tokens": 780 + t % 40,
                "running": 8.0,
                "waiting": 0.0,
            }
        )
    data["windows"] = windows
    step = data["steps"][0]
    data["steps"] = [{**step, "t_s": i * 3600 / MAX_STEPS} for i in range(MAX_STEPS)]
    for spike in data["spikes"]:
        spike["start_s"], spike["end_s"] = 1800.0, 1812.0
    return data


def test_an_hour_long_run_opens_in_under_two_seconds(browser, all_contexts, typed, tmp_path):
    """The incident page of a one-hour run, charts drawn, in under 2 s (load to last chart), with
    its 3,600 windows drawn as display buckets that keep the spike's peak."""
    from pages.display_windows import MAX_DISPLAY_WINDOWS

    page = render_incident(
        typed("incident", _hour_long(all_contexts["incident"])), tmp_path / "hour"
    )
    short = render_incident(typed("incident", all_contexts["incident"]), tmp_path / "minute")
    _open(browser, page.as_uri())  # warm: the browser's own start-up is not the page's cost
    started = time.perf_counter()
    _open(browser, short.as_uri())
    minute = time.perf_counter() - started
    started = time.perf_counter()
    logs = _open(browser, page.as_uri())
    elapsed = time.perf_counter() - started
    print(
        f"incident page, charts drawn after navigation started: one-hour run {elapsed:.2f} s, "
        f"one-minute run {minute:.2f} s"
    )
    assert not [e for e in logs if e["level"] in ("SEVERE", "ERROR")]
    assert elapsed < 2.0, f"the one-hour incident page took {elapsed:.2f} s"
    points = browser.execute_script(
        "const p = document.getElementById('chart-latency');"
        "return p && p.data ? p.data.map(t => (t.y || []).length) : [];"
    )
    assert points and max(points) <= MAX_DISPLAY_WINDOWS, points
    peak = browser.execute_script(
        "const p = document.getElementById('chart-latency');"
        "return Math.max(...p.data.flatMap(t => (t.y || []).filter(v => typeof v === 'number')));"
    )
    assert peak >= 255.0  # the one-window peak is not averaged away
