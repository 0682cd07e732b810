"""The docs stay true to the code: generated tables current, every config field described, every source citation
and every relative link resolvable."""

from __future__ import annotations

import inspect
import io
import re
import tokenize
from functools import cache
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from blueprint import reference
from blueprint.citation_links import link_citations
from blueprint.reference import sources_href
from components import config

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = ROOT / "docs" / "sources.md"
CITING_DIRS = ("components", "blueprint", "policies")

#: `[BC]`, `[NVDP]`: a source tag in a comment or docstring.
TAG = re.compile(r"\[([A-Z][A-Z0-9]+)\]")
#: `aws-gpu-facts.md §5f`, `facts §2`, `pulumi-testing-notes §1.4`, `notes §1.5`, a bare `§3d`.
SECTION = re.compile(r"(?:(pulumi-testing-notes|notes)(?:\.md)? )?§ ?(\d+[a-z]?(?:\.\d+)?)")
#: `source: AC+KP+NVHOPPER` or `{compute: AC+KP, ...}` in the catalog YAML.
YAML_SOURCE = re.compile(r"\bsource: *(\{[^}]*\}|[A-Z0-9+]+)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: A citation link: `[BC](sources.md#bc)`, `[aws-gpu-facts.md §5f](#aws-gpu-factsmd-5f)`.
CITATION_LINK = re.compile(
    r"\[([A-Z][A-Z0-9]+|(?:aws-gpu-facts\.md|pulumi-testing-notes) §[^\]]+)\]\(([^)\s]*#[^)\s]+)\)"
)


def _config_models() -> list[type[BaseModel]]:
    return [
        m
        for m in vars(config).values()
        if inspect.isclass(m) and issubclass(m, BaseModel) and m.__module__ == config.__name__ and m is not config.Model
    ]


def test_every_config_field_has_a_description() -> None:
    missing = [
        f"{m.__name__}.{name}"
        for m in _config_models()
        for name in m.model_fields
        if name not in reference.field_docs(m)
    ]
    assert not missing, f"config fields without a description (add a docstring under the field): {missing}"


@pytest.mark.program
def test_generated_docs_are_current() -> None:
    from tests.builders import shipped_plan

    assert reference.stale(shipped_plan) == [], "run `blueprint schema --write`"


#: A string literal's quotes and body, escapes included (a raw string cannot end in an odd backslash either).
_QUOTED = r"""(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^\\\n'])*'|\"(?:\\.|[^\\\n\"])*\")"""
#: A comment or a string literal (any prefix), found left to right as Python's tokenizer finds them: a `#` inside a
#: string and a quote inside a comment are taken as part of what they are in. Each alternative starts with one
#: character of a known set, which the regex engine skips to; a prefix is a prefix only at the start of a word.
PROSE = re.compile(rf"#[^\r\n]*|{_QUOTED}|[rRbBuUfF](?<!\w[rRbBuUfF])[rRbBuUfF]?{_QUOTED}", re.S)


def prose(source: str) -> str:
    """Comments and string literals of Python source (citations live there, not in code like `[SUBNET]`), one per
    line: what `tokenize` gives as COMMENT and STRING tokens (`test_prose_is_what_the_tokenizer_finds`), in a tenth
    of its time, so every file is read whole."""
    return "\n".join(match.group() for match in PROSE.finditer(source))


def tokenized_prose(source: str) -> str:
    """`prose` by Python's own tokenizer: its reference."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return "\n".join(t.string for t in tokens if t.type in (tokenize.COMMENT, tokenize.STRING))


@cache
def _cited_text(path: Path) -> str:
    """What may cite in a file: a Python file's prose, a YAML file whole; once per file and session."""
    text = path.read_text()
    return prose(text) if path.suffix == ".py" else text


def _citing_files() -> list[Path]:
    return [p for d in CITING_DIRS for p in sorted((ROOT / d).rglob("*")) if p.suffix in (".py", ".yaml")]


def _citations() -> tuple[set[str], set[str]]:
    """(tags, section headings) cited anywhere in the code, comments and YAML."""
    tags: set[str] = set()
    sections: set[str] = set()
    for path in _citing_files():
        text = _cited_text(path)
        tags.update(TAG.findall(text))
        for notes, number in SECTION.findall(text):
            sections.add(f"pulumi-testing-notes §{number}" if notes else f"aws-gpu-facts.md §{number.split('.')[0]}")
        if path.suffix == ".yaml":
            for value in YAML_SOURCE.findall(text):
                tags.update(re.findall(r"[A-Z][A-Z0-9]+", value))
    return tags, sections


def _headings(path: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in path.read_text().splitlines() if line.startswith("#")]


def test_every_cited_source_has_an_entry() -> None:
    tags, sections = _citations()
    headings = _headings(SOURCES)
    assert tags and sections
    missing_tags = sorted(t for t in tags if not any(h.startswith(f"[{t}]") for h in headings))
    missing_sections = sorted(s for s in sections if s not in headings)
    assert not missing_tags, f"docs/sources.md has no `### [TAG]` heading for {missing_tags}"
    assert not missing_sections, f"docs/sources.md has no heading for {missing_sections}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.lower())
    return text.replace(" ", "-")


@cache
def _anchors(path: Path) -> frozenset[str]:
    """The anchors of a page's headings, once per page: every link to it reads them."""
    return frozenset(_slug(h) for h in _headings(path)) if path.exists() else frozenset()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (doc.parent / path_part).resolve() if path_part else doc
        missing_anchor = bool(anchor) and resolved.suffix == ".md" and anchor not in _anchors(resolved)
        if not resolved.exists() or missing_anchor:
            broken.append(target)
    assert not broken, f"{doc.name}: broken links {broken}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_citation_links_to_its_source(doc: Path) -> None:
    """`[BC]` and `aws-gpu-facts.md §5f` in prose are links to their heading in docs/sources.md, which exists."""
    text = doc.read_text()
    assert link_citations(text, sources_href(doc)) == text, (
        f"{doc.name}: bare citations: link each as `[TAG](sources.md#tag)` (citation_links.link_citations)"
    )
    headings = _anchors(SOURCES)
    for label, target in CITATION_LINK.findall(text):
        path_part, _, anchor = target.partition("#")
        assert (doc.parent / path_part).resolve() == SOURCES.resolve() if path_part else doc == SOURCES, target
        assert anchor == _slug(label) and anchor in headings, f"{doc.name}: [{label}]({target}) has no heading"


def test_citation_links_leave_code_headings_and_links_alone() -> None:
    text = "\n".join(
        [
            "### [BC]",
            "see [BC] and `[BC]`, [AC](sources.md#ac), aws-gpu-facts.md §5f",
            "[REF]: https://example.com",
            "```",
            "[BC]",
            "```",
        ]
    )
    linked = link_citations(text, "sources.md")
    assert linked.split("\n") == [
        "### [BC]",
        "see [BC](sources.md#bc) and `[BC]`, [AC](sources.md#ac), "
        "[aws-gpu-facts.md §5f](sources.md#aws-gpu-factsmd-5f)",
        "[REF]: https://example.com",
        "```",
        "[BC]",
        "```",
    ]
    assert link_citations(linked, "sources.md") == linked


#: `docs/storage.md#efa-lustre-clients`, `docs/operations.md`: a page of the docs named in code.
DOC_REFERENCE = re.compile(r"\bdocs/([\w-]+\.md)(?:#([\w-]+))?")


def test_docs_named_in_the_code_exist_with_their_sections() -> None:
    """A module that points to docs/PAGE.md#section for its reasons points to a page and heading that exist.

    A bare `docs/PAGE.md` of no page here is an upstream project's (csi-driver-nfs `docs/driver-parameters.md`)."""
    broken = []
    for path in _citing_files():
        for page, section in DOC_REFERENCE.findall(_cited_text(path)):
            target = ROOT / "docs" / page
            if section and section not in _anchors(target):
                broken.append(f"{path.relative_to(ROOT)}: docs/{page}{'#' + section if section else ''}")
    assert not broken, broken


#: Python the prose finder could get wrong: quotes and `#` inside each other, escapes, prefixes, continued lines.
TRICKY_SOURCE = "\n".join(
    [
        'x = a[SUBNET]  # see [BC] and "quotes" in a comment',
        's = "a # that is no comment [AC]" + \'it\\\'s\' + "say \\"[KP]\\""',
        't = rb"\\d+" + Rb\'raw\' + f"{x!r} [NVDP]" + u\'u\' + F"{y}"',
        'doc = """Lines',
        'with \'single\' and "double" quotes, a \\""" escape, and [EFA] # not a comment',
        '"""',
        "more = '''[NCCL] in '' two'''",
        'joined = "one \\',
        'two [FSX]"',
        'empty, quote = "", "\'"',
        'ab = a  # "half-open quote',
        "if x:  # ' another",
        "    pass",
        "",
    ]
)


def test_prose_is_what_the_tokenizer_finds() -> None:
    """The prose finder agrees with Python's tokenizer on the cases it could get wrong (and on every file here:
    `test_prose_of_every_source_file_is_what_the_tokenizer_finds`)."""
    found = prose(TRICKY_SOURCE)
    assert found == tokenized_prose(TRICKY_SOURCE)
    assert TAG.findall(found) == ["BC", "AC", "KP", "NVDP", "EFA", "NCCL", "FSX"]


@pytest.mark.slow
def test_prose_of_every_source_file_is_what_the_tokenizer_finds() -> None:
    for path in ROOT.glob("**/*.py"):
        if ".venv" not in path.parts:
            source = path.read_text()
            assert prose(source) == tokenized_prose(source), path


class _Base(BaseModel):
    inherited: int = 0
    """Read from the base class.

    Indented continuation lines are cleaned."""


class _Documented(_Base):
    plain: str = ""
    """The attribute docstring."""
    explicit: str = Field("", description="The field's own description wins.")
    """Not this one."""
    undocumented: int = 0
    # a comment is no docstring
    after_comment: int = 0


def test_field_descriptions_are_the_attribute_docstrings_pydantic_would_read() -> None:
    assert reference.field_docs(_Documented) == {
        "inherited": "Read from the base class.\n\nIndented continuation lines are cleaned.",
        "plain": "The attribute docstring.",
        "explicit": "The field's own description wins.",
    }
