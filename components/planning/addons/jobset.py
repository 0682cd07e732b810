"""JobSet: the controller that runs a multi-node training job as one unit (pure, no Pulumi).

Invariant: the controller and its webhook run on the system pool ([JOBSET] chart 0.12.0: `controller.nodeSelector`
and `controller.tolerations`), as the image the released chart carries, with the chart's own restricted security
context (non-root, RuntimeDefault seccomp, every capability dropped), so its namespace enforces `restricted`. Its
webhook listens on 9443 and the API server calls it there: the NetworkPolicy of its namespace admits that port and
the kubelet's probes only. Why JobSet and not Kubeflow Trainer, and the failure policy the reference job uses:
docs/training.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from components.catalog import images
from components.planning.addons.placement import SYSTEM_NODE_SELECTOR, system_plans, tolerations_for
from components.planning.pools import PoolPlan
from components.planning.training_platform import JOBSET_NAMESPACE

JOBSET_RELEASE = "jobset"
NAMESPACE = JOBSET_NAMESPACE
#: The controller's pods, as the chart labels them ([JOBSET] templates/controller/_helpers.tpl
#: `jobset.controller.selectorLabels` with the release name `jobset`); the chart tests check them against the
#: rendered Deployment.
CONTROLLER_PODS = {
    "app.kubernetes.io/name": "jobset",
    "app.kubernetes.io/instance": JOBSET_RELEASE,
    "app.kubernetes.io/component": "controller",
}
#: The webhook server's container port ([JOBSET] templates/controller/deployment.yaml `webhook`, 9443), the port the
#: API server connects to behind the webhook Service's 443.
WEBHOOK_PORT = 9443


def jobset_values(plans: Sequence[PoolPlan]) -> dict[str, Any]:
    """Helm values: the controller on the system pool, tolerating its CriticalAddonsOnly taint, running the released
    image (the chart source's default is a staging image at `main`, which the release packaging replaces)."""
    image = images.image("jobset")
    return {
        "image": {"repository": image.repository, "tag": image.tag, "pullPolicy": "IfNotPresent"},
        "controller": {
            "nodeSelector": dict(SYSTEM_NODE_SELECTOR),
            "tolerations": tolerations_for(system_plans(plans)),
        },
    }
