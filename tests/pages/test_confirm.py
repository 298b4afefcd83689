"""pages.confirm: the confirmation page's context from a stored result, its headline and index
entry, rendered (both arms' numbers, the share and its interval, the intervention)."""

import json

import pytest

from pages.confirm import build_confirm_context
from templates.render import render_confirm


def result(verdict="confirmed", cause="memory", stored="memory", share=(0.9, 0.84, 0.96)):
    arms = []
    for i, (arm, excess) in enumerate((("recorded", 200.0), ("removed", 20.0)) * 2):
        arms.append(
            {
                "arm": arm,
                "repeat": i // 2 + 1,
                "run_id": f"20261203T000{i}00Z-confirm-x-000{i}",
                "baseline_ms": 50.0,
                "threshold_ms": 80.0,
                "spike_ms": 50.0 + excess,
                "excess_ms": excess,
                "windows_above": 8 if arm == "recorded" else 0,
                "reproduced": arm == "recorded",
                "note": "",
                "wall_s": 61.5,
            }
        )
    return {
        "run_id": "20261203T000000Z-incident-gc-0001",
        "spike_id": 1,
        "metric": "itl_p99",
        "cause": cause,
        "stored_cause": stored,
        "intervention": {
            "cause": cause,
            "name": "gc_off",
            "does": "automatic garbage collection frozen and disabled",
            "leaves": "explicit gc.collect() calls still run",
            "available": True,
            "reason": "",
        },
        "verdict": verdict,
        "reason": "removing the cause took 90% of the excess away",
        "exit_code": 0,
        "share": {"point": share[0], "low": share[1], "high": share[2], "pairs": 4},
        "arms": arms,
    }


def test_the_headline_says_the_share_its_interval_and_the_intervention():
    ctx = build_confirm_context(result())
    assert ctx.headline.startswith("memory: with gc_off, 90% [84%, 96%] of the ITL p99 excess")
    assert ctx.mean_ms("recorded", "excess_ms") == pytest.approx(200.0)
    assert ctx.mean_ms("removed", "excess_ms") == pytest.approx(20.0)
    assert not ctx.forced
    assert ctx.command == (
        "spikelens confirm 20261203T000000Z-incident-gc-0001 --spike 1 --repeats 2"
    )
    entry = ctx.entry()
    assert (entry.kind, entry.verdict, entry.top_cause) == ("confirm", "confirmed", "memory")


def test_a_forced_wrong_cause_not_confirmed_renders_as_suspect(tmp_path):
    ctx = build_confirm_context(
        result("not confirmed", cause="penalty", stored="memory", share=(0.1, -0.05, 0.2)),
        incident_href="../index.html",
    )
    assert ctx.forced and ctx.command.endswith("--cause penalty")
    page = render_confirm(ctx, tmp_path, "../../index.html")
    html = page.read_text()
    assert 'id="suspect"' in html and 'id="forced"' in html
    assert 'id="incident-link" href="../index.html"' in html
    assert html.count('class="arm-row"') == 4 and "250 ms" in html and "61.5 s" in html
    assert json.loads((tmp_path / "report.json").read_text())["verdict"] == "not confirmed"


def test_an_unknown_verdict_is_rejected():
    with pytest.raises(ValueError, match="verdict"):
        build_confirm_context(result(verdict="maybe"))


def test_a_measured_client_cause_shows_both_sides_and_no_arms(tmp_path):
    measured = {
        **result(cause="network", stored="network", share=(0.97, 0.97, 0.97)),
        "intervention": {
            "cause": "network",
            "name": "measured",
            "does": "nothing re-run: client and server p99 compared",
            "leaves": "client and network apart",
            "available": True,
            "reason": "",
        },
        "reason": "measured, not re-run: the server saw 5.0 ms of the client's 200.0 ms excess",
        "arms": [],
        "outside": {
            "compared": "TTFT",
            "client_baseline_ms": 40.0,
            "client_excess_ms": 200.0,
            "server_baseline_ms": 30.0,
            "server_excess_ms": 5.0,
            "windows_above": 10,
            "reproduced": True,
        },
    }
    measured["share"]["pairs"] = 0
    ctx = build_confirm_context(measured)
    assert ctx.outside is not None and ctx.headline.startswith("network: measured, not re-run")
    html = render_confirm(ctx, tmp_path, "../../index.html").read_text()
    assert "Share of the excess outside the engine" in html and 'data-side="server"' in html
    assert 'id="arms"' not in html and "200 ms" in html
