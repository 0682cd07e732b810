"""Network rules: no security group open to the whole internet, no administration port open to it under any
config, and every VPC's default security group closed."""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import Any

from policies.resources import (
    SECURITY_GROUP,
    SG_EGRESS_RULE,
    SG_INGRESS_RULE,
    SG_RULE,
    Resource,
    Stack,
    get,
    items,
    peek,
    strings,
)
from policies.rules.signatures import Config, StackViolations

VPC = "aws:ec2/vpc:Vpc"
DEFAULT_SECURITY_GROUP = "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup"

#: Remote server administration ports of Security Hub EC2.53/EC2.54: SSH (22) and RDP (3389).
ADMIN_PORTS = (22, 3389)


def is_world(cidr: str) -> bool:
    """0.0.0.0/0 and ::/0, however written (`0.0.0.0/0`, `::/0`, `0::0/0`)."""
    try:
        return ipaddress.ip_network(cidr, strict=False).prefixlen == 0
    except ValueError:
        return False


def world_covered(cidrs: Iterable[str]) -> list[str]:
    """The whole address spaces (`0.0.0.0/0`, `::/0`) that `cidrs` cover together: `0.0.0.0/1` with `128.0.0.0/1` is
    as open as `0.0.0.0/0`. The networks are merged (`ipaddress.collapse_addresses`) per IP version; text that is no
    network is ignored."""
    networks: dict[int, list[Any]] = {4: [], 6: []}
    for cidr in cidrs:
        try:
            network = ipaddress.ip_network(cidr.strip(), strict=False)
        except ValueError:
            continue
        networks[network.version].append(network)
    covered = []
    for version, found in networks.items():
        if any(n.prefixlen == 0 for n in ipaddress.collapse_addresses(found)):
            covered.append("0.0.0.0/0" if version == 4 else "::/0")
    return covered


def no_public_ingress(r: Resource, config: Config) -> Iterator[str]:
    """No security group accepts traffic from the whole internet (0.0.0.0/0 or ::/0).

    Nodes, file systems and the API endpoint are private; an open ingress rule is almost always a mistake
    (AWS Security Hub EC2.18/EC2.19, https://docs.aws.amazon.com/securityhub/latest/userguide/ec2-controls.html).
    """
    if r.type == SECURITY_GROUP:
        for rule in items(r.get("ingress")):
            cidrs = strings(get(rule, "cidrBlocks")) + strings(get(rule, "ipv6CidrBlocks"))
            for cidr in cidrs:
                if is_world(cidr):
                    yield f"security group '{r.name}' accepts ingress from {cidr} on {port_range(rule)}"
            if not any(is_world(c) for c in cidrs):
                for world in world_covered(cidrs):
                    yield (
                        f"security group '{r.name}' accepts ingress from {', '.join(cidrs)} on {port_range(rule)}, "
                        f"which together cover {world}"
                    )
    elif r.type == SG_INGRESS_RULE:
        for cidr in strings(r.get("cidrIpv4")) + strings(r.get("cidrIpv6")):
            if is_world(cidr):
                yield f"ingress rule '{r.name}' accepts traffic from {cidr} on {port_range(r.props)}"
    elif r.type == SG_RULE and r.get("type") == "ingress":
        for cidr in strings(r.get("cidrBlocks")) + strings(r.get("ipv6CidrBlocks")):
            if is_world(cidr):
                yield f"ingress rule '{r.name}' accepts traffic from {cidr} on {port_range(r.props)}"


def _ingress(r: Resource) -> Iterator[tuple[Any, list[str]]]:
    """(rule, source CIDRs) for every ingress rule a security-group resource holds or is."""
    if r.type in (SECURITY_GROUP, DEFAULT_SECURITY_GROUP):
        for rule in items(r.get("ingress")):
            yield rule, strings(get(rule, "cidrBlocks")) + strings(get(rule, "ipv6CidrBlocks"))
    elif r.type == SG_INGRESS_RULE:
        yield r.props, strings(r.get("cidrIpv4")) + strings(r.get("cidrIpv6"))
    elif r.type == SG_RULE and r.get("type") == "ingress":
        yield r.props, strings(r.get("cidrBlocks")) + strings(r.get("ipv6CidrBlocks"))


def _rule_key(rule: Any) -> tuple[str, Any, Any]:
    """(protocol, from port, to port) of a rule; protocol `-1` (all traffic) has no ports."""
    protocol = str(get(rule, "ipProtocol", default=get(rule, "protocol", default=""))).lower()
    if protocol in ("-1", "all"):
        return ("-1", None, None)
    return (protocol, peek(rule, "fromPort"), peek(rule, "toPort"))


def no_public_ingress_combined(stack: Stack, config: Config) -> StackViolations:
    """No security group admits the whole internet through several ingress rules whose sources together cover
    0.0.0.0/0 or ::/0 (`0.0.0.0/1` plus `128.0.0.0/1`, say), each harmless-looking on its own.

    `no-public-ingress` judges one rule at a time; a security group admits the union of its rules' sources
    (https://docs.aws.amazon.com/vpc/latest/userguide/security-group-rules.html: "the rules are aggregated"), so
    this rule merges the sources of every ingress rule on the same group and ports, an all-traffic rule counting
    for every port, with `ipaddress.collapse_addresses`.
    """
    sources: dict[str, dict[tuple[str, Any, Any], set[str]]] = defaultdict(lambda: defaultdict(set))
    names = {r.urn: r.name for r in stack}
    for r in stack.of_type(SECURITY_GROUP, DEFAULT_SECURITY_GROUP, SG_INGRESS_RULE, SG_RULE):
        for rule, cidrs in _ingress(r):
            group = r.urn
            if r.type in (SG_INGRESS_RULE, SG_RULE):
                ids = strings(peek(r.props, "securityGroupId"))
                groups = stack.referenced(r, "securityGroupId", ids, [SECURITY_GROUP, DEFAULT_SECURITY_GROUP])
                group = groups[0].urn if len(groups) == 1 else r.urn
            sources[group][_rule_key(rule)].update(cidrs)
    for group, by_key in sources.items():
        everything = by_key.get(("-1", None, None), set())
        for key, on_ports in sorted(by_key.items(), key=lambda kv: str(kv[0])):
            combined = on_ports | everything
            if any(is_world(c) for c in combined):
                continue  # one rule is world-open on its own: no-public-ingress reports it
            for world in world_covered(combined):
                ports = "all traffic" if key[0] == "-1" else f"{key[0]} {key[1]}-{key[2]}"
                yield (
                    f"security group '{names[group]}' admits {ports} from {', '.join(sorted(combined))}, which "
                    f"together cover {world}: name the networks that need access",
                    group,
                )


def opens_port(rule: Any, port: int) -> bool:
    """Whether a rule admits TCP to `port`: protocol all (-1) or tcp/6 with the port in fromPort..toPort."""
    protocol = str(get(rule, "ipProtocol", default=get(rule, "protocol", default=""))).lower()
    if protocol in ("-1", "all"):
        return True
    if protocol not in ("tcp", "6"):
        return False
    low, high = get(rule, "fromPort"), get(rule, "toPort")
    if low is None or high is None:
        return False
    return int(low) <= port <= int(high)


def no_world_admin_ports(r: Resource, config: Config) -> Iterator[str]:
    """No security group admits SSH (22) or RDP (3389) from 0.0.0.0/0 or ::/0 (Security Hub EC2.53, EC2.54, in the
    CIS AWS Foundations Benchmark standard).

    Stricter than `no-public-ingress` in one way: it holds even where an organisation relaxes that policy (a public
    load balancer's group), because an administration port open to the internet is brute-forced within minutes
    (https://docs.aws.amazon.com/securityhub/latest/userguide/ec2-controls.html). Nodes are reached through SSM
    Session Manager, which needs no inbound port.
    """
    for rule, cidrs in _ingress(r):
        # Each world-open source on its own, or the rule's sources together when only their union is world-open.
        sources = [c for c in cidrs if is_world(c)] or ([", ".join(cidrs)] if world_covered(cidrs) else [])
        for cidr in sources:
            for port in ADMIN_PORTS:
                if opens_port(rule, port):
                    yield f"'{r.name}' admits port {port} from {cidr} ({port_range(rule)})"


def default_security_group_closed(stack: Stack, config: Config) -> StackViolations:
    """Every VPC's default security group is taken over by the stack and left without rules (FSBP EC2.2, also in
    the CIS AWS Foundations Benchmark standard).

    AWS creates each VPC's default group allowing all traffic between its members and all egress; anything launched
    without a group (an ENI, an endpoint, a test instance) lands in it. `aws.ec2.DefaultSecurityGroup` adopts the
    group and removes every rule it does not declare
    (https://docs.aws.amazon.com/vpc/latest/userguide/default-security-group.html).
    """
    adopted: dict[str, list[Resource]] = {}
    for group in stack.of_type(DEFAULT_SECURITY_GROUP):
        for vpc in stack.referenced(group, "vpcId", strings(peek(group.props, "vpcId")), [VPC]):
            adopted.setdefault(vpc.urn, []).append(group)
        directions = [d for d in ("ingress", "egress") if items(group.get(d))]
        if directions:
            yield (
                f"default security group '{group.name}' has {' and '.join(directions)} rules: declare none "
                "(FSBP EC2.2)",
                group.urn,
            )
    for rule in stack.of_type(SG_INGRESS_RULE, SG_EGRESS_RULE, SG_RULE):
        group_ids = strings(peek(rule.props, "securityGroupId"))
        for group in stack.referenced(rule, "securityGroupId", group_ids, [DEFAULT_SECURITY_GROUP]):
            yield f"rule '{rule.name}' adds a rule to default security group '{group.name}' (FSBP EC2.2)", rule.urn
    for vpc in stack.of_type(VPC):
        if vpc.urn not in adopted:
            yield (
                f"VPC '{vpc.name}' leaves its default security group's allow rules in place: adopt it with "
                "aws.ec2.DefaultSecurityGroup(vpc_id=...) and no ingress or egress (FSBP EC2.2)",
                vpc.urn,
            )


def port_range(rule: Any) -> str:
    protocol = str(get(rule, "ipProtocol", default=get(rule, "protocol", default="?")))
    if protocol in ("-1", "all"):
        return "all ports"
    return f"{protocol} {get(rule, 'fromPort', default='?')}-{get(rule, 'toPort', default='?')}"
