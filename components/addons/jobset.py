"""JobSet: the multi-node job controller the training jobs run under (their failure policy restarts the whole job).
Why JobSet, where its pods run and its webhook's NetworkPolicy: `components.planning.addons.jobset`."""

from __future__ import annotations

from components.addons.helm import ChartAddon
from components.planning.addons.jobset import JOBSET_RELEASE, jobset_values
from components.planning.addons.jobset import NAMESPACE as JOBSET_NAMESPACE


class JobSet(ChartAddon):
    """The JobSet release. Helm installs its CRD first (the chart's `crds/`) and the release waits for the
    controller's Deployment to be ready, whose readiness waits for the webhook's certificate, so a JobSet applied
    after `pulumi up` finds both."""

    TYPE = "gpu-clusters:index:JobSet"
    RELEASE = JOBSET_RELEASE
    CHART = "jobset"
    NAMESPACE = JOBSET_NAMESPACE
    PLANNED_VALUES = jobset_values
