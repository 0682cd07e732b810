"""Container images the stack names itself, pinned by tag and digest where one is confirmed (`images.yaml`), and the
published advisories of the vLLM server with their affected ranges and fixed releases.

Invariants, checked at load: every entry cites a source; a digest is `sha256:<64 hex>` or null with a note saying
why; the default vLLM image is outside every refused advisory's range. See docs/security.md#the-serving-endpoint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from components.catalog.citations import CatalogError, check_tags, read_sources, read_yaml

__all__ = [
    "IMAGES_PATH",
    "Advisory",
    "ChartImage",
    "HybridNodeImage",
    "PinnedImage",
    "advisories_affecting",
    "chart_images",
    "hybrid_node_images",
    "image",
    "vllm_advisories",
    "vllm_release",
]

IMAGES_PATH = Path(__file__).parent / "images.yaml"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
#: A vLLM release as its image tags spell it: `v0.31.0`, `0.14.1`, `v0.30.0-cu129` (the suffix names the build).
_VLLM_RELEASE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)(?:\.post\d+)?(?:-[A-Za-z0-9._-]+)?$")
_SEVERITIES = ("low", "medium", "high", "critical")


@dataclass(frozen=True)
class PinnedImage:
    """An image by repository and tag, with its digest when a source confirmed one."""

    name: str
    repository: str
    tag: str
    digest: str | None
    source: str
    digest_note: str = ""
    notes: str = ""

    @property
    def reference(self) -> str:
        """`repository:tag@digest`, or `repository:tag` when no digest is confirmed."""
        return f"{self.repository}:{self.tag}" + (f"@{self.digest}" if self.digest else "")


@dataclass(frozen=True)
class Advisory:
    """A published vLLM advisory: releases from `introduced` (inclusive) to `fixed` (exclusive) are affected."""

    id: str
    aliases: tuple[str, ...]
    severity: str
    introduced: tuple[int, int, int]
    fixed: tuple[int, int, int]
    refused: bool
    summary: str
    source: str
    accepted_because: str = ""

    @property
    def fixed_version(self) -> str:
        return ".".join(map(str, self.fixed))

    @property
    def introduced_version(self) -> str:
        return ".".join(map(str, self.introduced))

    def affects(self, release: tuple[int, int, int]) -> bool:
        return self.introduced <= release < self.fixed


def vllm_release(tag: str) -> tuple[int, int, int] | None:
    """The release an image tag names (`v0.11.0-cu129` -> (0, 11, 0)); None for `latest`, nightlies, digests."""
    match = _VLLM_RELEASE.match(tag)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def _version(where: str, value: Any) -> tuple[int, int, int]:
    release = vllm_release(str(value))
    if release is None:
        raise CatalogError(f"{where}: {value!r} is not a release X.Y.Z")
    return release


def _image(entry: dict[str, Any], known: dict[str, Any], path: Path) -> PinnedImage:
    where = f"{path}: image {entry.get('name')}"
    check_tags(where, str(entry.get("source") or ""), known)
    digest = entry.get("digest")
    if digest is not None and not DIGEST.match(str(digest)):
        raise CatalogError(f"{where}: digest {digest!r} is not sha256:<64 hex digits>")
    if digest is None and not str(entry.get("digest_note") or "").strip():
        raise CatalogError(f"{where}: no digest, and no digest_note saying why")
    return PinnedImage(
        name=str(entry["name"]),
        repository=str(entry["repository"]),
        tag=str(entry["tag"]),
        digest=str(digest) if digest is not None else None,
        source=str(entry["source"]),
        digest_note=str(entry.get("digest_note") or "").strip(),
        notes=str(entry.get("notes") or "").strip(),
    )


def _advisory(entry: dict[str, Any], known: dict[str, Any], path: Path) -> Advisory:
    where = f"{path}: advisory {entry.get('id')}"
    check_tags(where, str(entry.get("source") or ""), known)
    severity = str(entry.get("severity"))
    if severity not in _SEVERITIES:
        raise CatalogError(f"{where}: severity {severity!r} is not one of {', '.join(_SEVERITIES)}")
    advisory = Advisory(
        id=str(entry["id"]),
        aliases=tuple(str(a) for a in entry.get("aliases") or ()),
        severity=severity,
        introduced=_version(where, entry.get("introduced")),
        fixed=_version(where, entry.get("fixed")),
        refused=bool(entry.get("refused")),
        summary=str(entry.get("summary") or "").strip(),
        source=str(entry["source"]),
        accepted_because=str(entry.get("accepted_because") or "").strip(),
    )
    if advisory.introduced >= advisory.fixed:
        raise CatalogError(f"{where}: introduced {advisory.introduced_version} is not before {advisory.fixed_version}")
    if not advisory.refused and not advisory.accepted_because:
        raise CatalogError(f"{where}: an advisory the stack does not refuse needs accepted_because")
    return advisory


@dataclass(frozen=True)
class ChartImage:
    """An image a chart runs, pinned by digest through the chart's values block at `values_key`."""

    chart: str
    values_key: str
    image: str
    tag: str
    digest: str
    digest_form: str
    source: str

    @property
    def values(self) -> dict[str, str]:
        """The values block's `tag` and `sha` in the form the chart takes."""
        return {
            "tag": self.tag,
            "sha": self.digest.removeprefix("sha256:") if self.digest_form == "hex" else self.digest,
        }


def _chart_image(entry: dict[str, Any], known: dict[str, Any], path: Path) -> ChartImage:
    where = f"{path}: chart image {entry.get('image')}"
    check_tags(where, str(entry.get("source") or ""), known)
    if not DIGEST.match(str(entry.get("digest"))):
        raise CatalogError(f"{where}: digest {entry.get('digest')!r} is not sha256:<64 hex digits>")
    if entry.get("digest_form") not in ("hex", "full"):
        raise CatalogError(f"{where}: digest_form is `hex` or `full`")
    fields = ("chart", "values_key", "image", "tag", "digest", "digest_form", "source")
    return ChartImage(**{key: str(entry[key]) for key in fields})


@dataclass(frozen=True)
class HybridNodeImage:
    """An image a chart's pods run on hybrid nodes, by the chart's defaults at its pinned version."""

    chart: str
    image: str
    tag: str
    source: str

    @property
    def reference(self) -> str:
        return f"{self.image}:{self.tag}"


def _hybrid_node_image(entry: dict[str, Any], known: dict[str, Any], path: Path) -> HybridNodeImage:
    where = f"{path}: hybrid node image {entry.get('image')}"
    check_tags(where, str(entry.get("source") or ""), known)
    if not entry.get("chart") or not entry.get("tag"):
        raise CatalogError(f"{where}: needs chart and tag")
    return HybridNodeImage(**{key: str(entry[key]) for key in ("chart", "image", "tag", "source")})


@dataclass(frozen=True)
class ImageCatalog:
    images: dict[str, PinnedImage]
    advisories: tuple[Advisory, ...]
    chart_images: tuple[ChartImage, ...] = ()
    hybrid_node_images: tuple[HybridNodeImage, ...] = ()


def load_images(path: Path | None = None) -> ImageCatalog:
    """Load and check images.yaml (or another file, for tests). Raises CatalogError."""
    ipath = path or IMAGES_PATH
    data = read_yaml(ipath)
    known = read_sources(data.get("sources"), ipath)
    images = {str(e.get("name")): _image(e, dict(known), ipath) for e in data.get("images") or []}
    advisories = tuple(_advisory(e, dict(known), ipath) for e in data.get("vllm_advisories") or [])
    if "vllm-openai" not in images:
        raise CatalogError(f"{ipath}: no vllm-openai image")
    release = vllm_release(images["vllm-openai"].tag)
    if release is None:
        raise CatalogError(f"{ipath}: the vllm-openai tag {images['vllm-openai'].tag!r} names no release")
    inside = [a.id for a in advisories if a.refused and a.affects(release)]
    if inside:
        raise CatalogError(f"{ipath}: the default vLLM image {images['vllm-openai'].tag} is inside {', '.join(inside)}")
    chart_images = tuple(_chart_image(e, dict(known), ipath) for e in data.get("chart_images") or [])
    on_hybrid = tuple(_hybrid_node_image(e, dict(known), ipath) for e in data.get("hybrid_node_images") or [])
    return ImageCatalog(images, advisories, chart_images, on_hybrid)


@cache
def _catalog() -> ImageCatalog:
    return load_images()


def image(name: str) -> PinnedImage:
    """One pinned image by name; KeyError naming the known ones."""
    images = _catalog().images
    if name not in images:
        raise KeyError(f"unknown image {name!r}; known: {', '.join(sorted(images))}")
    return images[name]


def chart_images(chart: str) -> tuple[ChartImage, ...]:
    """The digest-pinned images of one chart (none for a chart that takes no digest value)."""
    return tuple(i for i in _catalog().chart_images if i.chart == chart)


def hybrid_node_images(chart: str) -> tuple[HybridNodeImage, ...]:
    """The images one chart's pods run on hybrid nodes (none for a chart that keeps off them)."""
    return tuple(i for i in _catalog().hybrid_node_images if i.chart == chart)


def vllm_advisories() -> tuple[Advisory, ...]:
    """Every vLLM advisory the catalog records, refused or accepted."""
    return _catalog().advisories


def advisories_affecting(tag: str, *, refused_only: bool = True) -> list[Advisory]:
    """The advisories whose range holds the release an image tag names (none for a tag naming no release)."""
    release = vllm_release(tag)
    if release is None:
        return []
    return [a for a in vllm_advisories() if a.affects(release) and (a.refused or not refused_only)]
