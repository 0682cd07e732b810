"""Network rules: no security group open to the whole internet."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any

from policies.resources import (
    SECURITY_GROUP,
    SG_INGRESS_RULE,
    SG_RULE,
    Resource,
    get,
    items,
    strings,
)
from policies.rules.signatures import Config


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


def port_range(rule: Any) -> str:
    protocol = str(get(rule, "ipProtocol", default=get(rule, "protocol", default="?")))
    if protocol in ("-1", "all"):
        return "all ports"
    return f"{protocol} {get(rule, 'fromPort', default='?')}-{get(rule, 'toPort', default='?')}"
