"""The kubelet's maxPods: no more pods than the VPC CNI has addresses for on the node.

Invariant: maxPods = ENIs for pods x (IPv4 addresses per ENI - 1) + 2, capped at 110 or 250 by vCPUs, where an
`efa-only` interface on card 0 holds no pod ENI ([CNI], [NODEADM]); so the NodeConfig states it instead of
nodeadm's own table. Why and sources: docs/design-notes.md#maxpods.
"""

from __future__ import annotations

from collections.abc import Iterable

from components.catalog import InstanceType
from components.planning.efa import NetworkInterface

#: Whether the VPC CNI hands out /28 prefixes instead of single addresses (`ENABLE_PREFIX_DELEGATION`, default
#: `false`: https://github.com/aws/amazon-vpc-cni-k8s/blob/b52188387f2e2f10bf289ace929d6a63b176a4fa/README.md).
#: The vpc-cni add-on's configuration (components.managed_addons) sets the variable from this value, so maxPods and
#: the CNI cannot disagree.
VPC_CNI_PREFIX_DELEGATION = False
#: Addresses in one delegated IPv4 prefix (/28), the calculator's `IPS_PER_PREFIX`.
ADDRESSES_PER_PREFIX = 16
#: Host-network pods on every node that take no pod address (aws-node, kube-proxy).
HOST_NETWORK_PODS = 2
#: The calculator's ceilings: 110 pods up to 30 vCPUs, 250 above.
LOW_CPU_CEILING = 110
HIGH_CPU_CEILING = 250
HIGH_CPU_ABOVE_VCPUS = 30


def pod_enis(instance: InstanceType, interfaces: Iterable[NetworkInterface]) -> int:
    """Network interfaces that can carry pod addresses: card 0's slots less the `efa-only` ones placed there.

    The primary interface (`interface`, or `efa` in the older layout, which has an ENA side with addresses) is a
    pod ENI like those the CNI attaches later; an `efa-only` interface has no address to give.
    """
    efa_only_on_default_card = sum(
        1 for i in interfaces if i.network_card_index == 0 and i.interface_type == "efa-only"
    )
    return instance.default_card_max_enis - efa_only_on_default_card


def max_pods(
    instance: InstanceType,
    interfaces: Iterable[NetworkInterface],
    prefix_delegation: bool = VPC_CNI_PREFIX_DELEGATION,
) -> int:
    """The kubelet maxPods for `instance` wired with `interfaces` (empty: the one plain ENA of a non-EFA pool)."""
    addresses_per_slot = ADDRESSES_PER_PREFIX if prefix_delegation else 1
    pod_addresses = pod_enis(instance, interfaces) * (instance.ipv4_per_eni - 1) * addresses_per_slot
    ceiling = HIGH_CPU_CEILING if instance.vcpu > HIGH_CPU_ABOVE_VCPUS else LOW_CPU_CEILING
    return min(pod_addresses + HOST_NETWORK_PODS, ceiling)
