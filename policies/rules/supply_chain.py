"""Supply-chain rules: Helm releases pin an exact chart version from an explicit repository."""

from __future__ import annotations

from collections.abc import Iterator

from components.catalog.versions import EXACT_VERSION
from policies.resources import (
    Resource,
)
from policies.rules.releases import chart_name
from policies.rules.signatures import Config


def helm_chart_pinned(release: Resource, config: Config) -> Iterator[str]:
    """Helm releases pin an exact chart version from an explicit repository.

    Without `version` Helm installs whatever is newest at deploy time
    (https://helm.sh/docs/helm/helm_install/, `--version`), so two deploys of one commit can differ; a version range
    does the same more slowly. "Exact" is the catalog's definition (`components.catalog.versions.EXACT_VERSION`).
    """
    ref = str(release.get("chart", default=""))
    version = str(release.get("version", default="") or "")
    if not EXACT_VERSION.match(version):
        shown = f"'{version}'" if version else "no version"
        yield f"Helm release '{release.name}' ({chart_name(release)}) floats: {shown} is not an exact chart version"
    local = ref.startswith(("./", "../", "/"))
    repo = str(release.get("repositoryOpts", "repo", default="") or "")
    if not local and not ref.startswith("oci://") and not repo.startswith(("https://", "oci://")):
        yield f"Helm release '{release.name}' ({chart_name(release)}) has no https/oci repositoryOpts.repo"
