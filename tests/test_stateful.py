"""One protection rule for every resource whose loss loses data (components.planning.stateful)."""

from __future__ import annotations

from components.planning.stateful import STATEFUL_KINDS, Protection, stateful_protection


def test_every_stateful_kind_is_protected_and_kept_by_default() -> None:
    assert stateful_protection(True) == {
        kind: Protection(protect=True, retain_on_delete=True) for kind in STATEFUL_KINDS
    }


def test_opting_out_lets_destroy_delete_every_stateful_kind() -> None:
    assert stateful_protection(False) == {
        kind: Protection(protect=False, retain_on_delete=False) for kind in STATEFUL_KINDS
    }
