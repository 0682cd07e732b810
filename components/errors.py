"""The one error a stack's config can raise: every problem at once, each with its key path."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi


@dataclass(frozen=True, order=True)
class Problem:
    """`path` is the config key path as the user writes it (`nodePools[1].scaling.min`)."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(pulumi.RunError):
    """Raised before any resource is registered.

    A `pulumi.RunError` so that `pulumi up` prints the message without a Python traceback; `blueprint plan` prints
    the same lines on stderr and exits 2.
    """

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(set(problems), key=_order)
        lines = "\n".join(f"  {p}" for p in self.problems)
        super().__init__(f"the stack config has {len(self.problems)} problem(s):\n{lines}")


def _order(problem: Problem) -> tuple[int, str, str]:
    from components.config import SECTIONS

    head = re.split(r"[.\[( ]", problem.path, maxsplit=1)[0]
    rank = SECTIONS.index(head) if head in SECTIONS else len(SECTIONS)
    return rank, problem.path, problem.message
