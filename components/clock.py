"""The program's one reading of the wall clock, which offline plans pin so that one config gives one plan.

Under `pulumi up` nothing pins it and `utc_now` is the real time. `blueprint plan` and the tests run the program
inside `pinned(...)`: every value derived from the time (an SSM activation's `expirationDate`) is then the same in
every run. A context variable, not a global: each mocked run sees only its own pin.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, date, datetime

_PINNED: ContextVar[datetime | None] = ContextVar("pinned_utc_now", default=None)
_TODAY: ContextVar[date | None] = ContextVar("pinned_today", default=None)


def utc_now() -> datetime:
    """Now, timezone-aware in UTC: the pinned time inside `pinned`, the real time otherwise."""
    return _PINNED.get() or datetime.now(UTC)


@contextmanager
def pinned(at: datetime) -> Iterator[None]:
    """Make `utc_now` return `at` (which must carry a timezone) for the code run inside the block."""
    if at.tzinfo is None:
        raise ValueError("pinned needs a timezone-aware datetime")
    token = _PINNED.set(at)
    try:
        yield
    finally:
        _PINNED.reset(token)


def today() -> date:
    """Today's date in UTC, for the support calendars (which Kubernetes versions EKS still supports): the pinned day
    inside `calendar_pinned`, the real one otherwise. Apart from `pinned`, which offline plans set to a fixed past
    time: a plan must still refuse a version whose support has ended by the day it runs."""
    return _TODAY.get() or datetime.now(UTC).date()


@contextmanager
def calendar_pinned(day: date) -> Iterator[None]:
    """Make `today` return `day` for the code run inside the block (tests whose expected output names the
    versions supported on the day it was written)."""
    token = _TODAY.set(day)
    try:
        yield
    finally:
        _TODAY.reset(token)
