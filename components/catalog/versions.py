"""Pinned software versions: EKS Kubernetes versions, Helm charts, EKS managed add-ons (exact versions, minimums).

Each pin is data (`versions.yaml`) with its source, so the components, policy pack, plan and tests read one copy.
Invariants, checked at load: no floating chart version, a cluster-autoscaler per Kubernetes version, an exact
managed add-on version per Kubernetes version, nothing below its known minimum. Support status is derived from
end dates and a day, so the supported list moves with time. See docs/network-and-cluster.md#eks-managed-add-ons.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator

from components import clock
from components.catalog.citations import CatalogError, citation_texts, read_sources
from components.yaml_loader import parse_yaml

__all__ = [
    "AddonPin",
    "ChartPin",
    "ConformanceSuitePin",
    "KubernetesVersionSupport",
    "PinnedVersions",
    "VersionsError",
    "ai_conformance_suite",
    "chart",
    "charts",
    "cluster_autoscaler_chart",
    "cluster_autoscaler_charts",
    "default_kubernetes_version",
    "kubernetes_minor",
    "kubernetes_version_support",
    "load_versions",
    "managed_addon",
    "managed_addon_policy",
    "managed_addon_version",
    "managed_addons",
    "parse_version",
    "supported_kubernetes_versions",
    "version_at_least",
    "version_sources",
]

VERSIONS_PATH = Path(__file__).parent / "versions.yaml"

#: An exact release: optional "v", MAJOR.MINOR.PATCH, optional pre-release/build suffix ("-0", "-eksbuild.1").
EXACT_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(?:-[0-9A-Za-z][0-9A-Za-z.-]*)?$")
#: An EKS managed add-on version as EKS names it (DescribeAddonVersions): "v1.22.4-eksbuild.3".
EKS_ADDON_VERSION = re.compile(r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")
_KUBERNETES_MINOR = re.compile(r"^1\.\d+$")
_NUMBERS = re.compile(r"\d+")

SupportStatus = Literal["standard", "extended", "end-of-life"]


class VersionsError(ValueError):
    """versions.yaml is inconsistent or has a floating / unsourced pin (raised at load time)."""


def parse_version(version: str) -> tuple[int, ...]:
    """Numeric parts of a version, for ordering.

    "v1.18.4-eksbuild.2" -> (1, 18, 4, 2); "1.17.6-0" -> (1, 17, 6, 0). The suffix numbers order EKS
    builds and AWS rebuilds of one upstream release; a plain release compares lower than its numbered
    builds, which is the safe direction for minimum checks.
    """
    parts = tuple(int(n) for n in _NUMBERS.findall(version))
    if len(parts) < 2:
        raise ValueError(f"not a version: {version!r}")
    return parts


def version_at_least(version: str, minimum: str) -> bool:
    """True when ``version`` is the same release as or newer than ``minimum`` (see :func:`parse_version`)."""
    return parse_version(version) >= parse_version(minimum)


def kubernetes_minor(version: str) -> str:
    """ "1.35", "1.35.2", "v1.35.2" -> "1.35" (EKS versions are minors; image tags carry patches)."""
    major, minor = parse_version(version)[:2]
    return f"{major}.{minor}"


def _exact(value: str) -> str:
    if not EXACT_VERSION.match(value):
        raise ValueError(f"{value!r} is not an exact version (no 'latest', ranges or wildcards)")
    return value


class KubernetesVersionSupport(BaseModel):
    """An EKS Kubernetes version and its support end dates (None where no source gave one)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str = Field(pattern=_KUBERNETES_MINOR.pattern)
    standard_support_end: dt.date | None
    extended_support_end: dt.date | None
    source: str
    notes: str | None = None

    def status(self, on: dt.date | None = None) -> SupportStatus:
        """Support status on a day (default today). Unknown end dates mean "not ended yet"."""
        day = on or clock.today()
        if self.standard_support_end is None and self.extended_support_end is None:
            return "standard"
        if self.standard_support_end is not None and day <= self.standard_support_end:
            return "standard"
        if self.extended_support_end is None or day <= self.extended_support_end:
            return "extended"
        return "end-of-life"


class ChartPin(BaseModel):
    """A Helm chart pinned to an exact version, with where it comes from.

    ``repository`` is an https Helm repository or an ``oci://`` registry path; :attr:`chart_ref` gives the
    reference a Helm release takes in each case.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    repository: str = Field(pattern=r"^(https|oci)://\S+$")
    chart: str
    version: str
    app_version: str | None = None
    image_tag: str | None = Field(default=None, description="set as image.tag when not the chart default")
    minimum_app_version: str | None = None
    minimum_reason: str | None = None
    partially_confirmed: bool = False
    notes: str | None = None
    source: str

    @field_validator("version")
    @classmethod
    def _version_is_exact(cls, value: str) -> str:
        return _exact(value)

    @property
    def is_oci(self) -> bool:
        """True for charts served from an OCI registry (no ``helm repo add``)."""
        return self.repository.startswith("oci://")

    @property
    def chart_ref(self) -> str:
        """``oci://registry/path/chart`` for OCI charts, the bare chart name for https repositories."""
        return f"{self.repository.rstrip('/')}/{self.chart}" if self.is_oci else self.chart


class AddonPin(BaseModel):
    """An EKS managed add-on: the exact version installed per Kubernetes version, and the minimum our blueprints
    need, if any source sets one.

    ``version`` serves every Kubernetes version; ``by_kubernetes_minor`` is for add-ons EKS builds per minor
    (kube-proxy, CoreDNS). Exactly one is given (checked when loading).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    minimum_version: str | None
    reason: str | None = None
    feature_minimums: dict[str, str] = Field(default_factory=dict)
    source: str
    version: str | None = None
    by_kubernetes_minor: dict[str, str] = Field(default_factory=dict)
    version_source: str
    version_notes: str | None = None
    partially_confirmed: bool = False

    def accepts(self, version: str) -> bool:
        """Whether a stack-pinned version meets the minimum (always true without a minimum)."""
        return self.minimum_version is None or version_at_least(version, self.minimum_version)

    def version_for(self, kubernetes_version: str) -> str:
        """The pinned version for a cluster's Kubernetes version ("1.35" or "1.35.2"); KeyError when none."""
        if self.version is not None:
            return self.version
        minor = kubernetes_minor(kubernetes_version)
        if minor not in self.by_kubernetes_minor:
            raise _unknown(
                f"Kubernetes version for the {self.name} add-on", kubernetes_version, self.by_kubernetes_minor
            )
        return self.by_kubernetes_minor[minor]

    @property
    def pinned_versions(self) -> dict[str, str]:
        """Every pinned version by what it serves: {"*": v} or {minor: v}."""
        return {"*": self.version} if self.version is not None else dict(self.by_kubernetes_minor)


class ConformanceSuitePin(BaseModel):
    """The kubernetes-sigs/ai-conformance suite for one Kubernetes minor: the commit checked out, the tests it holds
    and the flags its test binary defines (docs/conformance.md#the-upstream-tests)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kubernetes_minor: str
    repository: str = Field(pattern=r"^https://\S+$")
    ref: str = Field(pattern=r"^([0-9a-f]{40}|v\d+\.\d+\.\d+)$")
    tests: tuple[str, ...] = Field(min_length=1)
    flags: frozenset[str]
    go_image: str = Field(pattern=r"^\S+:\d+\.\d+\.\d+$")
    notes: str | None = None
    source: str


@dataclass(frozen=True)
class PinnedVersions:
    """Everything in versions.yaml, validated together."""

    sources: Mapping[str, str]
    kubernetes: Mapping[str, KubernetesVersionSupport]
    default_kubernetes_version: str
    charts: Mapping[str, ChartPin]
    cluster_autoscaler: Mapping[str, ChartPin]
    managed_addon_policy: str
    managed_addons: Mapping[str, AddonPin]
    nodeadm: str
    ai_conformance_suite: Mapping[str, ConformanceSuitePin]


def _citations(raw: Any, path: Path) -> dict[str, str]:
    try:
        return citation_texts(read_sources(raw, path))
    except CatalogError as exc:
        raise VersionsError(str(exc)) from exc


def _check_source(where: str, value: str, known: Mapping[str, str]) -> None:
    tags = [t.strip() for t in value.split("+")]
    unknown = [t for t in tags if t not in known]
    if not value.strip() or unknown:
        raise VersionsError(f"{where}: unknown or missing source tag(s) {unknown or [value]!r}")


def _validated(model: type[BaseModel], data: Any, where: str) -> Any:
    if isinstance(data, dict) and not str(data.get("source") or "").strip():
        raise VersionsError(f"{where}: no source")
    try:
        return model.model_validate(data)
    except ValueError as exc:
        raise VersionsError(f"{where}: {exc}") from exc


def _check_addon(
    where: str, addon: AddonPin, known: Mapping[str, str], kubernetes: Mapping[str, KubernetesVersionSupport]
) -> None:
    """Sources cited, minimums exact, and one exact version, at or above the minimum, for every Kubernetes version."""
    _check_source(where, addon.source, known)
    _check_source(f"{where}: version_source", addon.version_source, known)
    for label, value in [("minimum_version", addon.minimum_version), *addon.feature_minimums.items()]:
        if value is not None and not EXACT_VERSION.match(value):
            raise VersionsError(f"{where}: {label} {value!r} is not exact")
    if (addon.version is None) == (not addon.by_kubernetes_minor):
        raise VersionsError(f"{where}: give exactly one of `version` and `by_kubernetes_minor`")
    unknown = sorted(set(addon.by_kubernetes_minor) - set(kubernetes))
    missing = sorted(set(kubernetes) - set(addon.by_kubernetes_minor)) if addon.by_kubernetes_minor else []
    if unknown or missing:
        raise VersionsError(f"{where}: by_kubernetes_minor must cover exactly {', '.join(sorted(kubernetes))}")
    for served, version in addon.pinned_versions.items():
        if not EKS_ADDON_VERSION.match(version):
            raise VersionsError(f"{where} ({served}): {version!r} is not an exact vX.Y.Z-eksbuild.N version")
        if not addon.accepts(version):
            raise VersionsError(f"{where} ({served}): {version} is below the minimum {addon.minimum_version}")


def load_versions(path: Path | None = None) -> PinnedVersions:
    """Load and check versions.yaml (or another file, for tests). Raises :class:`VersionsError`."""
    vpath = path or VERSIONS_PATH
    try:
        data = parse_yaml(vpath.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise VersionsError(f"{vpath}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise VersionsError(f"{vpath}: expected a mapping at the top level")
    known = _citations(data.get("sources"), vpath)

    kube_raw = data.get("kubernetes") or {}
    kubernetes: dict[str, KubernetesVersionSupport] = {}
    for entry in kube_raw.get("versions") or []:
        item: KubernetesVersionSupport = _validated(
            KubernetesVersionSupport, entry, f"{vpath}: kubernetes {entry.get('version')}"
        )
        _check_source(f"{vpath}: kubernetes {item.version}", item.source, known)
        kubernetes[item.version] = item
    if not kubernetes:
        raise VersionsError(f"{vpath}: no Kubernetes versions")
    default = str(kube_raw.get("default") or "")
    if default not in kubernetes:
        raise VersionsError(f"{vpath}: default Kubernetes version {default!r} is not listed")

    charts: dict[str, ChartPin] = {}
    for entry in data.get("charts") or []:
        pin: ChartPin = _validated(ChartPin, entry, f"{vpath}: chart {entry.get('name')}")
        _check_source(f"{vpath}: chart {pin.name}", pin.source, known)
        if pin.name in charts:
            raise VersionsError(f"{vpath}: chart {pin.name} listed twice")
        if pin.minimum_app_version is not None and (
            pin.app_version is None or not version_at_least(pin.app_version, pin.minimum_app_version)
        ):
            raise VersionsError(
                f"{vpath}: chart {pin.name} pins app {pin.app_version} below the minimum "
                f"{pin.minimum_app_version} ({pin.minimum_reason})"
            )
        charts[pin.name] = pin

    ca = data.get("cluster_autoscaler") or {}
    autoscaler: dict[str, ChartPin] = {}
    for minor, entry in (ca.get("by_kubernetes_minor") or {}).items():
        where = f"{vpath}: cluster_autoscaler {minor}"
        image_tag = str(entry.get("image_tag") or "")
        if not EXACT_VERSION.match(image_tag) or kubernetes_minor(image_tag) != str(minor):
            raise VersionsError(f"{where}: image tag {image_tag!r} is not an exact {minor}.x release")
        autoscaler[str(minor)] = _validated(
            ChartPin,
            {
                "name": "cluster-autoscaler",
                "repository": ca.get("repository"),
                "chart": ca.get("chart"),
                "version": entry.get("chart_version"),
                "app_version": entry.get("chart_app_version"),
                "image_tag": image_tag,
                "notes": entry.get("notes"),
                "source": ca.get("source"),
            },
            where,
        )
        _check_source(where, autoscaler[str(minor)].source, known)
    missing = sorted(set(kubernetes) - set(autoscaler))
    if missing:
        raise VersionsError(f"{vpath}: no cluster-autoscaler pin for Kubernetes {', '.join(missing)}")

    addons_raw = data.get("managed_addons") or {}
    policy = str(addons_raw.get("policy") or "").strip()
    if not policy:
        raise VersionsError(f"{vpath}: managed_addons.policy is required")
    addons: dict[str, AddonPin] = {}
    for entry in addons_raw.get("addons") or []:
        addon: AddonPin = _validated(AddonPin, entry, f"{vpath}: add-on {entry.get('name')}")
        _check_addon(f"{vpath}: add-on {addon.name}", addon, known, kubernetes)
        addons[addon.name] = addon

    nodeadm_raw = data.get("nodeadm") or {}
    nodeadm = str(nodeadm_raw.get("version") or "")
    if not EXACT_VERSION.match(nodeadm):
        raise VersionsError(f"{vpath}: nodeadm.version {nodeadm!r} is not an exact release")
    _check_source(f"{vpath}: nodeadm", str(nodeadm_raw.get("source") or ""), known)

    suite_raw = data.get("ai_conformance_suite") or {}
    suites: dict[str, ConformanceSuitePin] = {}
    for minor, entry in (suite_raw.get("by_kubernetes_minor") or {}).items():
        where = f"{vpath}: ai_conformance_suite {minor}"
        suites[str(minor)] = _validated(
            ConformanceSuitePin,
            {
                "kubernetes_minor": str(minor),
                "repository": suite_raw.get("repository"),
                "go_image": suite_raw.get("go_image"),
                "source": suite_raw.get("source"),
                **(entry or {}),
            },
            where,
        )
        _check_source(where, suites[str(minor)].source, known)
        if str(minor) not in kubernetes:
            raise VersionsError(f"{where}: Kubernetes {minor} is not listed")

    return PinnedVersions(
        sources=MappingProxyType(known),
        kubernetes=MappingProxyType(kubernetes),
        default_kubernetes_version=default,
        charts=MappingProxyType(charts),
        cluster_autoscaler=MappingProxyType(autoscaler),
        managed_addon_policy=policy,
        managed_addons=MappingProxyType(addons),
        nodeadm=nodeadm,
        ai_conformance_suite=MappingProxyType(suites),
    )


@cache
def _pinned() -> PinnedVersions:
    return load_versions()


def _sorted_minors(versions: list[str]) -> list[str]:
    return sorted(versions, key=parse_version, reverse=True)


def supported_kubernetes_versions(on: dt.date | None = None) -> list[str]:
    """EKS Kubernetes versions in standard or extended support on a day (default today), newest first."""
    return _sorted_minors(
        [v for v, s in _pinned().kubernetes.items() if s.status(on) != "end-of-life"],
    )


def kubernetes_version_support(version: str) -> KubernetesVersionSupport | None:
    """Support facts for a version ("1.35" or "1.35.2"), or None when the catalog does not know it."""
    try:
        minor = kubernetes_minor(version)
    except ValueError:
        return None
    return _pinned().kubernetes.get(minor)


def default_kubernetes_version() -> str:
    """The Kubernetes version stacks get when they do not choose one."""
    return _pinned().default_kubernetes_version


def _unknown(kind: str, name: str, known: Mapping[str, object]) -> KeyError:
    return KeyError(f"unknown {kind} {name!r}; known: {', '.join(sorted(known))}")


def charts() -> Mapping[str, ChartPin]:
    """All pinned Helm charts by name (cluster-autoscaler is per Kubernetes minor, see below)."""
    return _pinned().charts


def chart(name: str) -> ChartPin:
    """One pinned chart by name; unknown names raise KeyError listing the known ones."""
    pins = _pinned().charts
    if name not in pins:
        raise _unknown("chart", name, pins)
    return pins[name]


def cluster_autoscaler_charts() -> Mapping[str, ChartPin]:
    """Every cluster-autoscaler pin, by Kubernetes minor."""
    return _pinned().cluster_autoscaler


def cluster_autoscaler_chart(kubernetes_version: str) -> ChartPin:
    """The cluster-autoscaler chart and image tag for a cluster's Kubernetes version ("1.35" or "1.35.2").

    Cluster Autoscaler must run the same minor as the control plane, so the pin is per minor.
    """
    pins = _pinned().cluster_autoscaler
    minor = kubernetes_minor(kubernetes_version)
    if minor not in pins:
        raise _unknown("Kubernetes version for cluster-autoscaler", kubernetes_version, pins)
    return pins[minor]


def managed_addons() -> Mapping[str, AddonPin]:
    """All EKS managed add-ons the blueprints install, by add-on name."""
    return _pinned().managed_addons


def managed_addon(name: str) -> AddonPin:
    """One managed add-on's pin; unknown names raise KeyError listing the known ones."""
    addons = _pinned().managed_addons
    if name not in addons:
        raise _unknown("EKS managed add-on", name, addons)
    return addons[name]


def managed_addon_version(name: str, kubernetes_version: str) -> str:
    """The catalog's exact version of a managed add-on for a Kubernetes version ("1.35" or "1.35.2")."""
    return managed_addon(name).version_for(kubernetes_version)


def nodeadm_release() -> str:
    """The hybrid nodeadm release (an aws/eks-hybrid tag) servers download for joins and upgrades."""
    return _pinned().nodeadm


def managed_addon_policy() -> str:
    """How add-on versions are chosen: pinned here per Kubernetes version, overridable per stack."""
    return _pinned().managed_addon_policy


def ai_conformance_suite(kubernetes_version: str) -> ConformanceSuitePin | None:
    """The pinned ai-conformance suite for a Kubernetes version ("1.35" or "1.35.2"), or None where none is pinned."""
    return _pinned().ai_conformance_suite.get(kubernetes_minor(kubernetes_version))


def version_sources() -> Mapping[str, str]:
    """Source tag -> citation for versions.yaml."""
    return _pinned().sources
