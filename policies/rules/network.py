"""Network rules: no security group open to the whole internet, no administration port open to it under any
config, and every VPC's default security group closed."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
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


def no_public_ingress(r: Resource, config: Config) -> Iterator[str]:
    """No security group accepts traffic from the whole internet (0.0.0.0/0 or ::/0).

    Nodes, file systems and the API endpoint are private; an open ingress rule is almost always a mistake
    (AWS Security Hub EC2.18/EC2.19, https://docs.aws.amazon.com/securityhub/latest/userguide/ec2-controls.html).
    """
    if r.type == SECURITY_GROUP:
        for rule in items(r.get("ingress")):
            for cidr in strings(get(rule, "cidrBlocks")) + strings(get(rule, "ipv6CidrBlocks")):
                if is_world(cidr):
                    yield f"security group '{r.name}' accepts ingress from {cidr} on {port_range(rule)}"
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
        for cidr in cidrs:
            if not is_world(cidr):
                continue
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
