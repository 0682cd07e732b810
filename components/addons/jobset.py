"""JobSet: the multi-node job controller the training jobs run under (their failure policy restarts the whole job).
Why JobSet, where its pods run and its webhook's NetworkPolicy: `components.planning.addons.jobset`."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.addons.helm import helm_release
from components.catalog import versions
from components.context import ClusterContext
from components.planning.addons.jobset import JOBSET_RELEASE, NAMESPACE, jobset_values
from components.planning.pools import PoolPlan


class JobSet(pulumi.ComponentResource):
    """The JobSet release. Helm installs its CRD first (the chart's `crds/`) and the release waits for the
    controller's Deployment to be ready, whose readiness waits for the webhook's certificate, so a JobSet applied
    after `pulumi up` finds both."""

    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        plans: Sequence[PoolPlan],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:JobSet", name, None, opts)
        self.release: k8s.helm.v3.Release = helm_release(
            name, JOBSET_RELEASE, versions.chart("jobset"), NAMESPACE, jobset_values(plans), context, parent=self
        )
        self.register_outputs({"release": self.release.name})
