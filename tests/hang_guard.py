"""A guard against hangs that does not time the work: the body fails only when it is still running
after a bound far above its normal cost (milliseconds), so a loaded machine cannot fail it, while the
hazards it guards against (catastrophic regex backtracking, a quadratic scan of a large value) run for
minutes or forever."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from typing import Any

# Far above any honest run here, even with several suites sharing two cores.
HANG_SECONDS = 60.0


class HangError(Exception):
    pass


@contextlib.contextmanager
def no_hang(seconds: float = HANG_SECONDS) -> Iterator[None]:
    """Fail (instead of waiting forever) when the body runs longer than `seconds`."""

    def alarm(signum: int, frame: Any) -> None:
        raise HangError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
