"""GPU fabric rules: EFA interfaces, their security groups, one Availability Zone and a cluster placement group per
EFA pool, and the EFA device plugin ([EFAD], [BC], [EKSCH] in docs/sources.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pulumi_policy.proxy import UnknownValueError

from components.catalog import format_card_ranges
from components.catalog.versions import EXACT_VERSION, chart, version_at_least
from components.planning.reservations import RESERVED_CAPACITY_TYPES
from components.tags import POOL
from policies.resources import (
    EKS_CLUSTER,
    LAUNCH_TEMPLATE,
    PLACEMENT_GROUP,
    SECURITY_GROUP,
    SG_EGRESS_RULE,
    SG_INGRESS_RULE,
    SG_RULE,
    SUBNET,
    Resource,
    Stack,
    get,
    items,
    peek,
    strings,
    truthy,
)
from policies.rules.deployed_pools import catalog_entry, interfaces, node_pools
from policies.rules.releases import required_releases, untolerated
from policies.rules.signatures import Config, StackViolations

EFA_DEVICE_PLUGIN_CHART = chart("aws-efa-k8s-device-plugin").chart


#: The EFA device plugin chart's default `tolerations` is empty ([EKSCH], aws-gpu-facts.md §8).
EFA_DEVICE_PLUGIN_DEFAULT_TOLERATIONS: tuple[Mapping[str, str], ...] = ()


def efa_interfaces_complete(lt: Resource, config: Config) -> Iterator[str]:
    """An EFA launch template wires every EFA device its instance type has, on the cards that carry EFA.

    A p5.48xlarge has 32 EFA interfaces on 32 network cards; wiring fewer silently caps the fabric (each missing
    interface is 100 Gbps). Counts and card indexes come from the catalog ([KP] `vpc.amazonaws.com/efa`, [EFAD]).
    The primary interface must sit at network card 0, device 0 and must not be `efa-only` ([BC] ec2
    `NetworkCardIndex`; [EFAD] "You can't use an EFA-only network interface as the primary network interface").
    """
    nics = interfaces(lt)
    efa = [i for i in nics if i.is_efa]
    if not efa:
        return
    type_name = str(lt.get("instanceType", default=""))
    entry, problem = catalog_entry(type_name)
    if entry is None:
        yield f"launch template '{lt.name}' wires EFA but its instance type cannot be checked: {problem}"
        return
    if not entry.efa_supported:
        yield f"launch template '{lt.name}' wires EFA, but {type_name} has no EFA"
        return
    if len(efa) != entry.max_efa_interfaces:
        yield (
            f"launch template '{lt.name}' wires {len(efa)} of the {entry.max_efa_interfaces} EFA devices of "
            f"{type_name}; wire one EFA interface on each EFA network card ({format_card_ranges(entry.efa_cards)})"
        )
    stray = sorted({i.card for i in efa} - set(entry.efa_cards))
    if stray:
        yield (
            f"launch template '{lt.name}' puts EFA interfaces on network cards {format_card_ranges(stray)}, "
            f"which carry no EFA on {type_name}"
        )
    seen: set[tuple[int, int]] = set()
    for nic in nics:
        if (nic.card, nic.device) in seen:
            yield f"launch template '{lt.name}' has two interfaces at network card {nic.card}, device {nic.device}"
        seen.add((nic.card, nic.device))
    primary = [i for i in nics if (i.card, i.device) == (0, 0)]
    if not primary:
        yield f"launch template '{lt.name}' has no primary interface at network card 0, device 0"
    elif primary[0].type == "efa-only":
        yield f"launch template '{lt.name}': the primary interface (card 0, device 0) cannot be efa-only"


def efa_security_group_self_referencing(stack: Stack, config: Config) -> StackViolations:
    """The security group of every EFA interface allows all traffic from and to itself, in both directions.

    "To enable OS-bypass functionality, the EFA must be a member of a security group that allows all inbound and
    outbound traffic to and from the security group itself"; the egress self rule is needed even when egress to
    0.0.0.0/0 exists, because SRD traffic is authorized by group membership (aws-gpu-facts.md §2, AWS PCS
    https://docs.aws.amazon.com/pcs/latest/userguide/working-with_networking_efa_create-sg.html). The EKS
    cluster security group has both self rules built in (EKS "sec-group-reqs"), so it passes.
    """
    cluster_sgs = {
        str(peek(c.props, "vpcConfig", "clusterSecurityGroupId"))
        for c in stack.of_type(EKS_CLUSTER)
        if peek(c.props, "vpcConfig", "clusterSecurityGroupId")
    }
    for lt in stack.of_type(LAUNCH_TEMPLATE):
        efa = [i for i in interfaces(lt) if i.is_efa]
        if not efa:
            continue
        engine_linked = "networkInterfaces" in lt.property_dependencies
        if any(not i.security_groups for i in efa) and not engine_linked:
            yield (f"launch template '{lt.name}' has EFA interfaces without a security group", lt.urn)
            continue
        known = {g for i in efa for g in i.security_groups}
        if known and known <= cluster_sgs and not engine_linked:
            continue
        values = sorted(known - cluster_sgs)
        managed = stack.referenced(lt, "networkInterfaces", values, [SECURITY_GROUP])
        # Through the engine's property dependencies, the cluster security group shows up as the EKS cluster.
        via_cluster = engine_linked and any(
            stack.by_urn[u].type == EKS_CLUSTER
            for u in lt.property_dependencies["networkInterfaces"]
            if u in stack.by_urn
        )
        if not managed and not via_cluster and values:
            yield (
                f"launch template '{lt.name}': EFA security groups {values} are not in this stack, so their "
                "self-referencing rules cannot be checked",
                lt.urn,
            )
        for sg in managed:
            missing = [d for d in ("ingress", "egress") if not _allows_all_from_self(stack, sg, d)]
            if missing:
                yield (
                    f"security group '{sg.name}' (EFA interfaces of launch template '{lt.name}') lacks an all-traffic "
                    f"self-referencing {' and '.join(missing)} rule",
                    sg.urn,
                )


def _all_protocols(rule: Any) -> bool:
    return str(get(rule, "ipProtocol", default=get(rule, "protocol", default=""))) in ("-1", "all")


def _allows_all_from_self(stack: Stack, sg: Resource, direction: str) -> bool:
    """Does some rule let all traffic flow between `sg` and itself in `direction` (ingress or egress)?"""
    for inline in items(sg.get(direction)):
        if _all_protocols(inline) and (
            truthy(get(inline, "self", default=False)) or sg.urn in _inline_groups(stack, inline)
        ):
            return True
    standalone = SG_INGRESS_RULE if direction == "ingress" else SG_EGRESS_RULE
    for rule in stack.of_type(standalone):
        if _all_protocols(rule.props) and _rule_is_self(
            stack, rule, sg, "securityGroupId", "referencedSecurityGroupId"
        ):
            return True
    for rule in stack.of_type(SG_RULE):
        if rule.get("type") != direction or not _all_protocols(rule.props):
            continue
        if truthy(rule.get("self", default=False)) and sg in _targets(stack, rule, "securityGroupId"):
            return True
        if _rule_is_self(stack, rule, sg, "securityGroupId", "sourceSecurityGroupId"):
            return True
    return False


def _inline_groups(stack: Stack, inline: Any) -> set[str]:
    groups = strings(get(inline, "securityGroups"))
    return {r.urn for r in stack.of_type(SECURITY_GROUP) if any(g == peek(r.props, "id") for g in groups)}


def _targets(stack: Stack, rule: Resource, prop: str) -> list[Resource]:
    value = rule.get(prop) if prop not in rule.property_dependencies else None
    return stack.referenced(rule, prop, [value] if isinstance(value, str) else [], [SECURITY_GROUP])


def _rule_is_self(stack: Stack, rule: Resource, sg: Resource, target: str, peer: str) -> bool:
    """A rule on `sg` whose peer is `sg` itself: by property dependencies when the engine gives them, else by value."""
    if target in rule.property_dependencies and peer in rule.property_dependencies:
        return set(rule.property_dependencies[target]) == set(rule.property_dependencies[peer]) == {sg.urn}
    group, other = rule.get(target), rule.get(peer)
    return bool(group) and group == other and sg in _targets(stack, rule, target)


def efa_pool_single_az(stack: Stack, config: Config) -> StackViolations:
    """An EFA pool's subnets are all in one Availability Zone: "EFA isn't supported over different availability
    zones" (https://docs.amazonaws.cn/en_us/parallelcluster/latest/ug/efa-v3.html, aws-gpu-facts.md §2)."""
    for pool in node_pools(stack):
        if not pool.efa:
            continue
        values = strings(pool.asg.get(pool.subnets_property))
        subnets = stack.referenced(pool.asg, pool.subnets_property, values, [SUBNET])
        zones = {str(s.get("availabilityZone") or s.get("availabilityZoneId") or "?") for s in subnets}
        unresolved = max(len(values) - len(subnets), 0)
        if len(zones - {"?"}) > 1:
            yield (f"EFA pool '{pool.name}' spans availability zones {sorted(zones - {'?'})}", pool.asg.urn)
        elif (unresolved or "?" in zones) and max(len(values), len(subnets)) > 1:
            yield (
                f"EFA pool '{pool.name}' has {max(len(values), len(subnets))} subnets whose zones cannot all be "
                "read; give it one subnet",
                pool.asg.urn,
            )
        azs = strings(pool.asg.get("availabilityZones"))
        if len(set(azs)) > 1:
            yield (f"EFA pool '{pool.name}' spans availability zones {sorted(set(azs))}", pool.asg.urn)


def efa_placement_group(stack: Stack, config: Config) -> StackViolations:
    """EFA pools bought on demand or spot launch into a cluster placement group; capacity blocks and reservations
    do not (AWS already placed that capacity, and a forced group fails to launch).

    AWS: "We recommended you launch all instances that use EFA in a cluster placement group"
    (https://docs.aws.amazon.com/pcs/latest/userguide/working-with_networking_efa_create-placement-group.html);
    capacity blocks run without one (aws-parallelcluster tests; terraform-aws-eks #3730; eksctl #7949).
    """
    for pool in node_pools(stack):
        if not pool.efa or pool.capacity_type in RESERVED_CAPACITY_TYPES:
            continue
        lt = pool.launch_template
        if lt is None:  # pool.efa implies a resolved launch template; this keeps the type checker informed
            continue
        asg_group, lt_group = _set_value(pool.asg, "placementGroup"), _set_value(lt, "placement", "groupName")
        if asg_group is None and lt_group is None:
            yield (
                f"EFA pool '{pool.name}' ({pool.capacity_type}) has no cluster placement group "
                "(placementGroup on the Auto Scaling group or placement.groupName on the launch template)",
                pool.asg.urn,
            )
            continue
        source, prop, value = (
            (pool.asg, "placementGroup", asg_group) if asg_group is not None else (lt, "placement", lt_group)
        )
        for group in stack.referenced(source, prop, [str(value)] if value else [], [PLACEMENT_GROUP]):
            if group.get("strategy") != "cluster":
                yield (
                    f"EFA pool '{pool.name}' uses placement group '{group.name}' with strategy "
                    f"'{group.get('strategy')}', not 'cluster'",
                    pool.asg.urn,
                )


def _set_value(r: Resource, *path: str) -> str | None:
    """A property's value; "" when it is set but not known yet (a preview), None when it is not set."""
    try:
        value = r.get(*path)
    except UnknownValueError:
        return ""
    return str(value) if value else None


def efa_device_plugin_deployed(stack: Stack, config: Config) -> StackViolations:
    """When any pool wires EFA, the AWS EFA device plugin runs and tolerates the taints of every EFA pool.

    The EKS AMIs carry the EFA host software but not the device plugin, so without it pods cannot request
    `vpc.amazonaws.com/efa` (aws-gpu-facts.md §2 "EFA on EKS"); its chart tolerates nothing by default ([EKSCH]),
    so on tainted GPU nodes it never starts (facts §10.5). An `image.tag` override must not go below the plugin
    release versions.yaml sets as the floor (peers.md #8: older plugins count NVLink devices as EFA).
    """
    efa_pools = [p for p in node_pools(stack) if p.efa]
    if not efa_pools:
        return
    releases = yield from required_releases(stack, EFA_DEVICE_PLUGIN_CHART, efa_pools, "EFA")
    if not releases:
        return
    floor = chart("aws-efa-k8s-device-plugin").minimum_app_version
    for release in releases:
        tag = get(release.get("values", default={}), "image", "tag")
        if floor and isinstance(tag, str) and EXACT_VERSION.match(tag) and not version_at_least(tag, floor):
            yield (
                f"Helm release '{release.name}' runs EFA device plugin {tag}, older than {floor}: "
                f"{chart('aws-efa-k8s-device-plugin').minimum_reason}",
                release.urn,
            )
    yield from untolerated(efa_pools, releases, EFA_DEVICE_PLUGIN_DEFAULT_TOLERATIONS)


#: Where each kind of job keeps its pod templates (JobSet: one per replicated job).
JOB_POD_TEMPLATES: Mapping[str, tuple[tuple[str | int, ...], ...]] = {
    "kubernetes:core/v1:Pod": (("spec",),),
    "kubernetes:batch/v1:Job": (("spec", "template", "spec"),),
    "kubernetes:batch/v1:CronJob": (("spec", "jobTemplate", "spec", "template", "spec"),),
}
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
EFA_RESOURCE = "vpc.amazonaws.com/efa"


def _job_pod_specs(r: Resource) -> list[Any]:
    if r.type == JOBSET:
        return [get(job, "template", "spec", "template", "spec") for job in items(r.get("spec", "replicatedJobs"))]
    return [r.get(*path) for path in JOB_POD_TEMPLATES.get(r.type, ())]


def _efa_requested(pod: Any) -> int:
    total = 0
    for container in items(get(pod, "containers")):
        value = get(container, "resources", "limits", EFA_RESOURCE) or get(
            container, "resources", "requests", EFA_RESOURCE
        )
        total += int(str(value)) if value is not None and str(value).isdigit() else 0
    return total


def efa_jobs_request_every_device(stack: Stack, config: Config) -> StackViolations:
    """A job (Pod, Job, CronJob or JobSet) pinned to an EFA pool requests every EFA device of the node.

    One worker per node is how the fabric is used: a pod with fewer `vpc.amazonaws.com/efa` devices than its node
    has runs NCCL over part of the node's bandwidth (or, with none, over TCP sockets), and leaves the rest to a
    second pod that would share the node's GPUs' network. Pods are pinned by the pool label `gpu-clusters/pool`
    (docs/training.md#the-reference-job).
    """
    devices = {
        p.name: sum(1 for i in interfaces(p.launch_template) if i.is_efa)
        for p in node_pools(stack)
        if p.efa and p.launch_template is not None
    }
    if not devices:
        return
    for r in stack.of_type(JOBSET, *JOB_POD_TEMPLATES):
        for pod in _job_pod_specs(r):
            pool = get(pod, "nodeSelector", POOL)
            if pool not in devices:
                continue
            requested = _efa_requested(pod)
            if requested != devices[pool]:
                kind = r.type.rsplit(":", 1)[-1]
                yield (
                    f"{kind} '{r.get('metadata', 'name', default=r.name)}' runs on EFA pool '{pool}' with "
                    f"{requested} of its nodes' {devices[pool]} EFA devices: request {EFA_RESOURCE}: "
                    f"{devices[pool]}",
                    r.urn,
                )
