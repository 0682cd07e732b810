"""Source citations in the docs as links to their entry in docs/sources.md: `[BC]` becomes `[BC](sources.md#bc)`
and `aws-gpu-facts.md §5f` becomes a link to that section, so every citation a reader meets resolves to a heading.

Headings, code spans and fenced code stay as written (a heading is the anchor itself; code shows text literally).
`tests/test_docs.py` checks that no bare citation is left and that every link resolves.
"""

from __future__ import annotations

import re

#: `[BC]` not already a link (`[BC](...)`) or inside another bracket.
TAG = re.compile(r"(?<![\[\w])\[([A-Z][A-Z0-9]+)\](?![(\[])")
#: `aws-gpu-facts.md §5f`, `pulumi-testing-notes §1.3`, not already a link text.
SECTION = re.compile(r"(?<!\[)\b((?:aws-gpu-facts\.md|pulumi-testing-notes) §\d+[a-z]?(?:\.\d+)?)(?!\]\()")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _tag_link(match: re.Match[str], href: str) -> str:
    text = match.string
    if not text[: match.start()].strip() and text[match.end() : match.end() + 1] == ":":
        return match.group(0)  # a reference definition, `[BC]: <url>`
    return f"[{match.group(1)}]({href}#{anchor(match.group(1))})"


def _link_prose(text: str, href: str) -> str:
    text = TAG.sub(lambda m: _tag_link(m, href), text)
    return SECTION.sub(lambda m: f"[{m.group(1)}]({href}#{anchor(m.group(1))})", text)


def _link_line(line: str, href: str) -> str:
    out, last = [], 0
    for span in _CODE_SPAN.finditer(line):
        out += [_link_prose(line[last : span.start()], href), span.group(0)]
        last = span.end()
    return "".join([*out, _link_prose(line[last:], href)])


def link_citations(markdown: str, href: str) -> str:
    """`markdown` with every bare citation linked to `href` (the path of docs/sources.md from the document, or ""
    within sources.md itself)."""
    lines, fenced = [], False
    for line in markdown.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        skip = fenced or line.startswith("#") or line.lstrip().startswith("```")
        lines.append(line if skip else _link_line(line, href))
    return "\n".join(lines)
