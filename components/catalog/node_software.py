"""What GPU nodes run below Kubernetes: the NVIDIA driver, the CUDA version it supports and the NVIDIA Container
Toolkit, per EKS AL2023 NVIDIA AMI release and for the on-prem servers' runbook (`versions.yaml` `node_software`).

Invariants, checked at load: every entry cites a source of versions.yaml; versions are dotted numbers; no AMI release
twice. A pin matches a found version when its numbers start with the pin's (`580` is a driver branch, `580.159.03`
one release), compared as numbers, so the DRA driver's `580.159.3` is the same release. See docs/operations.md,
"Driver and runtime versions".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType

from components.catalog.citations import CatalogError, check_tags, read_sources, read_yaml

__all__ = [
    "NodeSoftware",
    "ami_release_software",
    "ami_releases",
    "load_node_software",
    "on_prem_software",
    "version_matches",
]

VERSIONS_PATH = Path(__file__).parent / "versions.yaml"
_DOTTED = re.compile(r"^\d+(?:\.\d+)*$")
_RELEASE = re.compile(r"^v\d{8}$")


def _numbers(version: str) -> tuple[int, ...]:
    """`580.159.03` -> (580, 159, 3); a leading `v` is dropped. ValueError when not dotted numbers."""
    text = version.strip().removeprefix("v")
    if not _DOTTED.match(text):
        raise ValueError(f"not a dotted version: {version!r}")
    return tuple(int(part) for part in text.split("."))


def version_matches(found: str, pinned: str) -> bool:
    """Whether a version found on a node is the pinned one: its numbers start with the pin's (a branch such as `580`
    matches every 580.x). Text that is not a dotted version never matches."""
    try:
        have, want = _numbers(found), _numbers(pinned)
    except ValueError:
        return False
    return have[: len(want)] == want


@dataclass(frozen=True)
class NodeSoftware:
    """The driver, CUDA and container toolkit versions one node image or the runbook pins, and their source tags."""

    #: What pins them: `AMI release v20260714` or `the on-prem runbook`.
    origin: str
    nvidia_driver: str
    cuda: str
    container_toolkit: str
    source: str


@dataclass(frozen=True)
class _Catalog:
    releases: Mapping[str, NodeSoftware]
    on_prem: NodeSoftware


def _entry(raw: object, origin: str, where: str, known: Mapping[str, object]) -> NodeSoftware:
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: expected a mapping")
    values: dict[str, str] = {}
    for key in ("nvidia_driver", "cuda", "container_toolkit"):
        value = str(raw.get(key) or "")
        if not _DOTTED.match(value):
            raise CatalogError(f"{where}: {key} {value!r} is not a dotted version (580.159.03, 13.0, or a branch: 580)")
        values[key] = value
    source = str(raw.get("source") or "")
    check_tags(where, source, known)
    return NodeSoftware(origin, values["nvidia_driver"], values["cuda"], values["container_toolkit"], source)


def load_node_software(path: Path | None = None) -> _Catalog:
    """Read and check `node_software` of versions.yaml (or another file, for tests). Raises CatalogError."""
    vpath = path or VERSIONS_PATH
    data = read_yaml(vpath)
    known = read_sources(data.get("sources"), vpath)
    section = data.get("node_software")
    if not isinstance(section, dict):
        raise CatalogError(f"{vpath}: a `node_software` mapping (al2023_nvidia, on_prem) is required")
    releases: dict[str, NodeSoftware] = {}
    for raw in section.get("al2023_nvidia") or []:
        release = str(raw.get("release") or "") if isinstance(raw, dict) else ""
        where = f"{vpath}: node_software.al2023_nvidia {release or '?'}"
        if not _RELEASE.match(release):
            raise CatalogError(f"{where}: release {release!r} is not an AL2023 AMI release (v20260714)")
        if release in releases:
            raise CatalogError(f"{where}: listed twice")
        releases[release] = _entry(raw, f"AMI release {release}", where, known)
    on_prem = _entry(section.get("on_prem"), "the on-prem runbook", f"{vpath}: node_software.on_prem", known)
    return _Catalog(MappingProxyType(releases), on_prem)


@cache
def _pinned() -> _Catalog:
    return load_node_software()


def ami_releases() -> Mapping[str, NodeSoftware]:
    """Every AL2023 NVIDIA AMI release the catalog knows the GPU software of, by release."""
    return _pinned().releases


def ami_release_software(release: str) -> NodeSoftware | None:
    """What an AL2023 NVIDIA AMI release ships, or None when the catalog does not list the release."""
    return _pinned().releases.get(release)


def on_prem_software() -> NodeSoftware:
    """What the on-prem runbook installs on the hybrid servers."""
    return _pinned().on_prem
