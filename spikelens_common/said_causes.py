"""What a spike's verdict says: the analysis (rca) scores it and the incident page (pages) shows it,
so the rule lives here, where both may read it."""

from __future__ import annotations

# Two causes that each explain a third of a spike's excess or more are both said: neither is "the"
# cause, and naming one would read as if the other were noise. At most three causes can clear it.
BOTH_SHARE = 1 / 3
UNEXPLAINED = "unexplained"  # the uncovered share: no cause, so never said beside a verdict


def said_causes(top_cause: str, shares: dict[str, float]) -> tuple[str, ...]:
    """The spike's top cause, then every other cause that, like the top cause, covers BOTH_SHARE
    of the excess or more (largest first). A top cause under BOTH_SHARE is said alone: beside a
    small verdict no other cause is "as large"."""
    if shares.get(top_cause, 0.0) < BOTH_SHARE:
        return (top_cause,)
    others = sorted(
        (c for c, v in shares.items() if c not in (top_cause, UNEXPLAINED) and v >= BOTH_SHARE),
        key=lambda c: -shares[c],
    )
    return (top_cause, *others)
