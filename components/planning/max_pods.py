"""The kubelet's maxPods: no more pods than the VPC CNI has addresses for on the node.

Every pod outside the host network takes one VPC address, which the VPC CNI takes from the network interfaces of
the node's default network card (card 0 on every catalog type; [CNI] `DefaultNetworkCardIndex`). A kubelet that
admits more pods than that leaves the extra ones stuck in `ContainerCreating` ("failed to assign an IP address").

Left alone, nodeadm sets maxPods from its own table as if every interface slot of card 0 held a pod ENI
(`CalcMaxPods`: "# of ENI on default network card * (# of IPv4 per ENI - 1) + 2", with no ceiling;
https://github.com/awslabs/amazon-eks-ami/blob/81fec2e895854f599974fe4d3d72f61c0a9aaffa/nodeadm/internal/kubelet/eni_max_pods.go).
That is wrong on EFA pools in AWS's layout (components.planning.efa): the `efa-only` interface at (card 0, device 1)
fills one of card 0's slots and carries no IP address at all, so a p5.48xlarge (two slots on card 0) has one pod
ENI, not two. The VPC CNI itself counts an `efa-only` interface against its card's ENI limit (aws/amazon-vpc-cni-k8s
`filterUnmanagedENIs`, v1.20.0+: "Skipping ENI ... since it is EFA only ENI"). So the NodeConfig states maxPods.

The arithmetic is the EKS AMI's max-pods calculator
(https://github.com/awslabs/amazon-eks-ami/blob/0a6d499edc0ca838929601700b8b7eb7c7c81b9a/templates/al2/runtime/max-pods-calculator.sh,
the EKS user guide's "Choose an optimal Amazon EC2 node instance type", Maximum number of Pods,
https://docs.aws.amazon.com/eks/latest/userguide/choosing-instance-type.html):

    ENIs for pods x (IPv4 addresses per ENI - 1) + 2

- each ENI's primary address is not given to pods, hence the `- 1`;
- `+ 2` for the host-network pods every node runs anyway (aws-node and kube-proxy);
- with prefix delegation each secondary slot holds a /28 prefix of 16 addresses instead of one address;
- the result is capped at 110 pods on types with at most 30 vCPUs and 250 above (the calculator's
  `MAX_POD_CEILING_FOR_LOW_CPU` / `_HIGH_CPU`, the recommendation it prints unless `--show-max-allowed`).
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
