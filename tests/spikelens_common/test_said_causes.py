"""spikelens_common.said_causes: a verdict says a second cause only when both cover a third."""

from spikelens_common.said_causes import said_causes


def test_a_verdict_says_every_cause_that_covers_a_third_like_itself():
    shares = {"memory": 0.45, "client": 0.35, "host": 0.1, "unexplained": 0.1}
    assert said_causes("memory", shares) == ("memory", "client")
    assert said_causes("memory", {"memory": 0.6, "client": 0.3}) == ("memory",)
    # 'unexplained' is no cause to say; beside a verdict under a third, nothing else is said
    assert said_causes("load", {"load": 0.4, "unexplained": 0.6}) == ("load",)
    assert said_causes("load", {"load": 0.3, "host": 0.3}) == ("load",)
    # three causes can each clear a third only at exactly a third: all three are said
    assert said_causes("host", {"host": 1 / 3, "load": 1 / 3, "memory": 1 / 3}) == (
        "host",
        "load",
        "memory",
    )
