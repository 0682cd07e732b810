"""The reference training job's script, shipped to its namespace as a ConfigMap of `programs/train_reference.py`, and
on the Prometheus path the PodMonitor that has Prometheus scrape the job's workers once they run.

The stack never starts GPU work by itself: it creates these only (and, on a DRA pool, the workers' GPU claim
template), and `blueprint training-job` prints the JobSet (`components.planning.training_job`) that mounts the script,
for the user to apply (docs/training.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pulumi
import pulumi_kubernetes as k8s

from components.context import ClusterContext
from components.planning.addons.monitoring import POD_MONITOR_LABELS
from components.planning.dra import claim_template_name
from components.planning.training_job import (
    SCRIPT_FILE,
    TrainingJobPlan,
    claim_template,
    pod_monitor,
    script_config_map,
)

#: The script, as the project ships it.
SCRIPT_PATH = Path(__file__).resolve().parent.parent / "programs" / SCRIPT_FILE
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-clusters"}


def script_source() -> str:
    return SCRIPT_PATH.read_text(encoding="utf-8")


class TrainingScript(pulumi.ComponentResource):
    """`config_map`: the script's source under its file name, in the job's namespace, after the namespace exists.
    `scrape`: the job's PodMonitor when `prometheus` (kube-prometheus-stack, whose CRDs it needs) runs."""

    def __init__(
        self,
        name: str,
        *,
        context: ClusterContext,
        plan: TrainingJobPlan,
        prometheus: pulumi.Resource | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:TrainingScript", name, None, opts)
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-script",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=script_config_map(plan.name),
                namespace=plan.namespace,
                labels={**MANAGED_BY, "app.kubernetes.io/name": plan.name},
            ),
            data={SCRIPT_FILE: script_source()},
            opts=pulumi.ResourceOptions(
                provider=context.k8s_provider,
                parent=self,
                depends_on=[*context.kubernetes_ready, *context.namespace_ready(plan.namespace)],
            ),
        )
        self.scrape: k8s.apiextensions.CustomResource | None = None
        if prometheus is not None:
            body = pod_monitor(plan, POD_MONITOR_LABELS)
            self.scrape = k8s.apiextensions.CustomResource(
                f"{name}-metrics",
                api_version=body["apiVersion"],
                kind=body["kind"],
                metadata=body["metadata"],
                spec=body["spec"],
                opts=pulumi.ResourceOptions(
                    provider=context.k8s_provider,
                    parent=self,
                    depends_on=[*context.kubernetes_ready, *context.namespace_ready(plan.namespace), prometheus],
                ),
            )
        gpus = claim_template(plan)
        #: On a DRA pool, the workers' GPUs: one claim per worker pod from this template.
        self.claim_template: k8s.resource.v1.ResourceClaimTemplate | None = None
        if gpus is not None:
            self.claim_template = k8s.resource.v1.ResourceClaimTemplate(
                f"{name}-gpus",
                metadata=cast(Any, {"name": claim_template_name(plan.name), "namespace": plan.namespace}),
                spec=cast(Any, gpus),
                opts=pulumi.ResourceOptions(
                    provider=context.k8s_provider,
                    parent=self,
                    depends_on=[*context.kubernetes_ready, *context.namespace_ready(plan.namespace)],
                ),
            )
        self.register_outputs({"configMap": self.config_map.metadata["name"]})
