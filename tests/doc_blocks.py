"""The fenced code blocks of the README and docs/*.md, for the tests that run what the docs show
(`tests/test_docs_examples.py`, `tests/test_docs_commands.py`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    """One fenced block: its document, the line of its opening fence, its language and text."""

    doc: Path
    line: int
    lang: str
    body: str
    above: str  # the last non-blank line before the fence

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def _blocks() -> list[Block]:
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for match in FENCE.finditer(text):
            before = [line for line in text[: match.start()].splitlines() if line.strip()]
            line = text.count("\n", 0, match.start()) + 1
            out.append(Block(doc, line, match.group(1), match.group(2), before[-1] if before else ""))
    return out


BLOCKS = _blocks()


def is_blueprint(token: str) -> bool:
    """Whether a command line's word runs the CLI (`blueprint`, `.venv/bin/blueprint`)."""
    return Path(token).name == "blueprint"
