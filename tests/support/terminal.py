"""Start a CLI under test the way a terminal would: its own session, SIGINT at its default.

CI may run the suite from a non-interactive shell's background job, where SIGINT is ignored, and
a child inherits that across exec: Ctrl-C sent by a test would then never reach the CLI (it kept
serving, and the test timed out waiting for it to exit)."""

from __future__ import annotations

import os
import signal


def terminal_like() -> None:
    """preexec_fn: lead a new session (a process group of its own) with SIGINT at SIG_DFL."""
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
