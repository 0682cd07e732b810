"""One preflight finding: what was checked, how it came out, and what to do about it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["pass", "fail", "warn", "skip"]


@dataclass(frozen=True)
class Finding:
    #: The check it belongs to (`zones`, `offerings`, `quotas`, ...).
    check: str
    status: Status
    #: What it is about: an AZ, a pool, a quota, an add-on, a role, a reservation.
    subject: str
    detail: str
    #: What to do when it is not a pass ("" for a pass).
    fix: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "check": self.check,
            "status": self.status,
            "subject": self.subject,
            "detail": self.detail,
            "fix": self.fix,
        }


def failed(findings: list[Finding]) -> bool:
    """Whether `pulumi up` would fail on what was found: any `fail` (warnings and skips pass)."""
    return any(f.status == "fail" for f in findings)
