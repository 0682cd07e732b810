"""The plan summary: what a stack builds, in the figures people decide on (GPUs, fabric, storage, $/hour).

Computed from the validated spec and the pool plans -- the same derived facts the components were built from --
never re-derived from the registered resources.
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict
from itertools import pairwise
from typing import Any

from components import clock
from components.catalog import prices
from components.config import StackConfig
from components.planning.cost import PoolCost, StackCost, stack_cost
from components.planning.dra import allocates_through_dra
from components.planning.gpu_runtime import gpu_server_commands
from components.planning.hybrid import (
    hybrid_node_config,
    nodeadm_install_command,
    offline_cluster_details,
    offline_credentials,
)
from components.planning.hybrid.egress import egress, hybrid_images
from components.planning.hybrid.join_script import join_script
from components.planning.hybrid.site import site_summary, static_route_warnings
from components.planning.management import auto_management_warning, managed_blockers
from components.planning.mig import advertised_resources, mig_devices
from components.planning.node_groups import repair_settings
from components.planning.pools import PoolPlan
from components.planning.queues import quota_warnings
from components.planning.quotas import stack_quotas
from components.planning.serving import METRICS_PORT, SERVING_PORT
from components.planning.stack_plan import StackPlan
from components.planning.training_job import training_summary
from components.validation.offerings import unchecked_zone_warnings


def pool_summary(plan: PoolPlan, cost: StackCost) -> dict[str, Any]:
    """One pool's figures; a hybrid GPU pool adds how its servers get the NVIDIA container runtime and the exact
    commands each runs after `nodeadm init` (`components.planning.gpu_runtime`). `migDevicesPerGpu` is a MIG pool's
    partition of each GPU, `gpuResourcesPerNode` what one node advertises once the device plugin runs (whole or
    time-sliced GPUs, or MIG devices: components.planning.mig; none on a pool whose `gpuAllocation` is `dra`, whose
    GPUs are ResourceSlice devices of the class `gpu.nvidia.com`). `hourlyUsdPerNode` is the Region's on-demand price
    (0 for owned servers, None where the catalog has no price there); `hourlyUsd` is None for an unpriced pool.
    `healthGate` says whether new nodes wait for the health gate and at which DCGM level; `repair.maxPerHour` is the
    health loop's hourly cap of replacements (None on hybrid pools, whose servers are never replaced)."""
    pool_cost = cost.pools.get(plan.name, PoolCost(0.0, 0.0, 0.0) if plan.kind == "hybrid" else None)
    per_node = prices.on_demand_usd_per_hour(plan.instance.name, cost.region) if plan.instance else 0.0
    summary: dict[str, Any] = {
        "name": plan.name,
        "kind": plan.kind,
        "role": plan.role,
        "instanceType": plan.instance.name if plan.instance else None,
        "instanceTypes": list(plan.instance_types),
        "gpuModel": plan.gpu_model,
        "gpusPerNode": plan.gpus_per_node,
        "minNodes": plan.min_nodes,
        "maxNodes": plan.max_nodes,
        "capacityType": plan.capacity_type,
        "scalingMode": plan.pool.scaling.mode if plan.kind == "aws" else "fixed",
        "availabilityZones": list(plan.availability_zones),
        "placementGroup": plan.placement_group,
        "efaDevicesPerNode": plan.efa_devices,
        "maxEfaDevicesPerNode": plan.max_efa_devices,
        "maxPods": plan.max_pods,
        "fabricGbpsPerNode": plan.fabric_gbps,
        "localStorage": plan.local_storage,
        "taints": [t.render() for t in plan.taints],
        "lustreClient": plan.lustre_client,
        "migDevicesPerGpu": mig_devices(plan) or None,
        "gpuAllocation": plan.pool.gpu_allocation if plan.is_gpu else None,
        "gpuResourcesPerNode": {} if allocates_through_dra(plan) else advertised_resources(plan, plan.mig_strategy),
        "hourlyUsdPerNode": per_node,
        "hourlyUsd": (
            None if pool_cost is None else {"idle": round(pool_cost.idle_usd, 4), "max": round(pool_cost.max_usd, 4)}
        ),
        "healthGate": {
            "gated": plan.health_gated,
            "dcgmLevel": plan.pool.health_gate.dcgm_level if plan.health_gated else None,
        },
        "repair": {"maxPerHour": plan.pool.repair.max_per_hour if plan.kind == "aws" else None},
    }
    if plan.kind == "aws":
        summary.update(management_summary(plan))
    if plan.kind == "hybrid" and plan.is_gpu:
        summary["gpuRuntime"] = {
            "mode": plan.pool.gpu_runtime,
            "serverCommands": gpu_server_commands(plan),
        }
    return summary


def management_summary(plan: PoolPlan) -> dict[str, Any]:
    """`management` (`managed` or `self-managed`); a self-managed pool's `selfManagedBecause` (each setting a
    managed node group cannot carry, by key path; empty when configured so); a managed pool's `nodeRepair` (EKS node
    auto repair as registered: components.planning.node_groups)."""
    if plan.management == "managed":
        repair = repair_settings(plan)
        return {
            "management": "managed",
            "nodeRepair": {
                "enabled": repair.enabled,
                "maxParallelCount": repair.max_parallel_count,
                "maxParallelPercentage": repair.max_parallel_percentage,
                "maxUnhealthyCount": repair.max_unhealthy_count,
                "maxUnhealthyPercentage": repair.max_unhealthy_percentage,
                "overrides": [asdict(o) for o in repair.overrides],
            },
        }
    because = [] if plan.pool.management == "self-managed" else managed_blockers(plan.pool, plan.instance_refresh)
    return {"management": "self-managed", "selfManagedBecause": [f"{b.path}: {b.message}" for b in because]}


#: The warning a stack gets when it creates alarms that tell nobody (the `alarms-notify-someone` policy says the same
#: of each alarm).
ALARMS_NOTIFY_NOBODY = (
    "GPU alarms notify nobody: set addons.monitoring.alerts.email (a topic is created) or "
    "addons.monitoring.alerts.snsTopicArn (an existing topic)"
)


def serving_summary(stack_plan: StackPlan) -> list[dict[str, Any]]:
    """Each serving workload with the rule its ScaledObject applies: the queue rule's target (`queue_rules`) or the
    GPU-utilization rule's windows (the same `serving_rule` object)."""
    spec = stack_plan.spec
    namespace = spec.storage.nfs.kubernetes.namespace if spec.storage.nfs is not None else "default"
    out = []
    for workload in spec.workloads.serving:
        rule = stack_plan.serving[workload.name]
        queue = stack_plan.queue_rules.get(workload.name)
        entry: dict[str, Any] = {
            "name": workload.name,
            "pool": workload.pool,
            "model": workload.model,
            "gpusPerReplica": workload.gpus_per_replica,
        }
        if queue is not None:
            entry |= {
                "rule": "queue",
                "replicas": {"min": queue.min_replicas, "max": queue.max_replicas, "perNode": rule.replicas_per_node},
                "targetInFlightPerReplica": queue.target_in_flight,
            }
        else:
            entry |= {
                "rule": "gpu-utilization",
                "replicas": {"min": rule.min_replicas, "max": rule.max_replicas, "perNode": rule.replicas_per_node},
                "scaleOut": {
                    "abovePercent": rule.scale_out_above_percent,
                    "afterMinutes": rule.scale_out_after_minutes,
                    "replicas": rule.scale_out_replicas,
                },
                "scaleIn": {
                    "belowPercent": rule.scale_in_below_percent,
                    "afterMinutes": rule.scale_in_after_minutes,
                    "replicas": rule.scale_in_replicas,
                },
                "cooldownSeconds": rule.cooldown_seconds,
            }
        out.append(
            entry
            | {
                "endpoint": f"http://{workload.name}.{namespace}.svc:{SERVING_PORT}/v1",
                "gateway": gateway_summary(stack_plan, workload.name),
            }
        )
    return out


def gateway_summary(stack_plan: StackPlan, workload: str) -> dict[str, Any] | None:
    """Where the inference Gateway routes the workload's requests from (components.planning.inference_routes): its
    route, the model header value it matches, its weight and its share of the model's requests; None when not
    exposed."""
    routing = stack_plan.inference_routing
    routes = routing.routes if routing is not None else ()
    for route in routes:
        total = sum(b.weight for b in route.backends)
        for backend in route.backends:
            if backend.workload == workload:
                return {
                    "route": route.name,
                    "model": route.model,
                    "weight": backend.weight,
                    "sharePercent": round(100 * backend.weight / total, 2) if total else 0.0,
                    "endpoint": routing.endpoint if routing is not None else None,
                }
    return None


def hybrid_summary(stack_plan: StackPlan) -> dict[str, Any]:
    """What the on-prem servers need: the HTTPS destinations they reach (derived from the images the plan runs on
    them, components.planning.hybrid.egress), those images, and per pool the NodeConfig (cluster outputs and
    credentials as placeholders until `pulumi up`) and the join script each server runs."""
    spec = stack_plan.spec
    images = hybrid_images(spec, stack_plan.addons, stack_plan.pools)
    providers = [p.pool.credentials.provider for p in stack_plan.hybrid]
    cluster = offline_cluster_details(str(spec.cluster.service_cidr))
    version = spec.cluster.kubernetes_version
    return {
        "egress": [rule.to_json() for rule in egress(spec.region, providers, images)],
        "images": [{"image": i.reference, "registry": i.registry, "runsIt": i.runs_it} for i in images],
        "pools": [
            {
                "name": p.name,
                "nodeConfig": hybrid_node_config(
                    spec.cluster.name, spec.region, cluster, offline_credentials(p.pool.credentials.provider), p
                ),
                "nodeadmInstall": nodeadm_install_command(version, p.pool.credentials.provider, spec.region),
                "joinScript": join_script(p, version, spec.network.vpc_cidr, spec.region),
            }
            for p in stack_plan.hybrid
        ],
    }


def alerts_summary(stack_plan: StackPlan) -> dict[str, Any]:
    """Where alerts go: an existing SNS topic, a topic the stack creates for an email address, or nowhere."""
    alerts = stack_plan.spec.addons.monitoring.alerts
    selection = stack_plan.addons
    return {
        "alarms": selection.on("container-insights") or selection.on("dcgm-prometheus"),
        "destination": {"existing": alerts.sns_topic_arn, "create": alerts.email, "none": None}[selection.alerts_topic],
    }


#: The address blocks reserved for documentation (RFC 5737, https://www.rfc-editor.org/rfc/rfc5737): the shipped
#: stacks admit one to the API as a placeholder, and nobody's deployer sits in one.
DOCUMENTATION_NETWORKS = tuple(
    ipaddress.IPv4Network(block) for block in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")
)


def placeholder_api_cidrs(spec: StackConfig) -> list[ipaddress.IPv4Network]:
    """API access CIDRs inside a documentation range: placeholders that would leave `pulumi up` unable to reach the
    API (every Kubernetes resource would time out), so the plan says to replace them."""
    endpoint = spec.cluster.endpoint
    return [
        cidr
        for cidr in [*endpoint.public_access_cidrs, *endpoint.private_access_cidrs]
        if any(cidr.subnet_of(net) for net in DOCUMENTATION_NETWORKS)
    ]


#: Hex digits in ascending order: an id whose hex holds a run of `EXAMPLE_RUN` of them (`tgw-0123456789abcdef0`) or
#: one digit repeated is an example, as AWS's documentation writes them; a random id holds such a run about once in
#: a hundred thousand.
HEX_ORDER = "0123456789abcdef"
EXAMPLE_RUN = 6


def example_id(resource_id: str) -> bool:
    """Whether an AWS id (`tgw-...`, `vgw-...`) is an example rather than a real resource's."""
    digits = resource_id.partition("-")[2]
    ascending = [HEX_ORDER.find(b) - HEX_ORDER.find(a) in (1, -15) for a, b in pairwise(digits)]
    runs = "".join("1" if step else "0" for step in ascending)
    return len(set(digits)) == 1 or "1" * (EXAMPLE_RUN - 1) in runs


def placeholder_site_gateways(spec: StackConfig) -> list[str]:
    """The site connection's gateway id when it is an example: the attachment would fail on `pulumi up`."""
    site = spec.network.site_connection
    if site is None:
        return []
    return [gw for gw in (site.transit_gateway_id, site.virtual_private_gateway_id) if gw and example_id(gw)]


def warnings(stack_plan: StackPlan, cost: StackCost) -> list[str]:
    """What a stack builds but probably did not mean to: alarms with nowhere to send them, API access CIDRs that are
    documentation placeholders, an example id for the gateway to the site, pools in AZs whose offerings could not be
    checked without their AZ IDs, billed parts the catalog has no price for (left out of $/h), hybrid pools whose
    pod blocks are routed by static routes that a rejoin leaves stale, and ClusterQueues that may admit more GPUs for
    a namespace than its ResourceQuota lets it create, and cloud pools whose kind `management: auto` decided (a later
    edit could flip it and replace every node)."""
    spec, plans = stack_plan.spec, stack_plan.pools
    found: list[str] = [
        f"cost: {item.kind} {item.name}: {item.reason}; not counted in $/h idle or at max" for item in cost.unpriced
    ]
    alerts = alerts_summary(stack_plan)
    if alerts["alarms"] and alerts["destination"] is None:
        found.append(ALARMS_NOTIFY_NOBODY)
    found.extend(
        f"cluster.endpoint admits {cidr}, a documentation range (RFC 5737): replace it with the network that runs "
        "`pulumi up` (docs/operations.md, 'Reaching the API'), or the deployer cannot reach the API"
        for cidr in placeholder_api_cidrs(spec)
    )
    found.extend(
        f"network.siteConnection names {gateway}, an example id: replace it with the gateway your VPN or Direct "
        "Connect link to the site ends on (docs/network-and-cluster.md, 'Reaching the site'), or attaching the VPC "
        "fails"
        for gateway in placeholder_site_gateways(spec)
    )
    found.extend(unchecked_zone_warnings(spec, plans))
    found.extend(static_route_warnings(plans))
    found.extend(quota_warnings(spec, plans, stack_plan.job_queues))
    found.extend(w for p in plans if (w := auto_management_warning(p.name, p.pool, p.management)))
    return found


def cost_summary(cost: StackCost) -> dict[str, Any]:
    """The plan summary's `cost`: each billed part with its $/h idle and at max (their sums are `hourlyUsd`), what
    has no price in the Region (`complete` is false then), what is billed by use and so has no figure at plan time
    (`notCounted`), and what was paid up front (components.planning.cost)."""
    source = prices.instance_price_source(cost.region)
    return {
        "region": cost.region,
        "hoursPerMonth": prices.hours_per_month(),
        "spotDiscountEstimate": prices.spot_discount_estimate(),
        "instancePrices": {"source": source.tag, "title": source.title, "url": source.url, "date": source.date},
        "breakdown": [
            {
                "kind": item.kind,
                "name": item.name,
                "idleUsd": round(item.idle_usd, 4),
                "maxUsd": round(item.max_usd, 4),
                "detail": item.detail,
                "source": item.source,
                "estimate": item.estimate,
            }
            for item in cost.items
        ],
        "unpriced": [asdict(item) for item in cost.unpriced],
        "committed": [asdict(item) for item in cost.committed],
        "notCounted": [asdict(item) for item in cost.not_counted],
        "complete": not cost.unpriced,
    }


def summarize(stack_plan: StackPlan) -> dict[str, Any]:
    spec, plans = stack_plan.spec, stack_plan.pools
    cost = stack_cost(stack_plan, clock.utc_now().date())
    return {
        "cluster": spec.cluster.name,
        "region": spec.region,
        "kubernetesVersion": spec.cluster.kubernetes_version,
        "nodePools": [pool_summary(p, cost) for p in plans],
        "storage": stack_plan.storage,
        "gpus": {
            "min": sum(p.gpus_per_node * p.min_nodes for p in plans),
            "max": sum(p.gpus_per_node * p.max_nodes for p in plans),
        },
        "hourlyUsd": {
            "idle": round(cost.idle_usd, 2),
            "max": round(cost.max_usd, 2),
            "maxOnDemand": round(cost.max_on_demand_usd, 2),
            "spotSaving": round(cost.spot_saving_usd, 2),
        },
        "cost": cost_summary(cost),
        "alerts": alerts_summary(stack_plan),
        "serving": serving_summary(stack_plan),
        # The reference training job on its training pool: GPUs, and a checkpoint's size and write time at the
        # Lustre file system's throughput (components.planning.training_job); None without `workloads.training`.
        "trainingJob": training_summary(stack_plan.training) if stack_plan.training is not None else None,
        "hybridSite": site_summary(
            plans, stack_plan.addons.on("dcgm-prometheus"), {w.pool: METRICS_PORT for w in spec.workloads.serving}
        ),
        **({"hybrid": hybrid_summary(stack_plan)} if stack_plan.hybrid else {}),
        "quotas": [need.to_json() for need in stack_quotas(spec, plans)],
        # Kueue's ClusterQueues, LocalQueues, flavors and gang admission (components.planning.queues); null without.
        "queues": stack_plan.job_queues.summary() if stack_plan.job_queues is not None else None,
        "warnings": warnings(stack_plan, cost),
    }
