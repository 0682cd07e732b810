"""Node rules: instance metadata, public IPs and root volume encryption of every launch template, and GPU pools
that repel ordinary pods while the NVIDIA device plugin (or, on DRA pools, NVIDIA's DRA driver) tolerates them ([NVDP],
[DRAGPU] in docs/sources.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from components import tags
from components.catalog.versions import chart
from components.planning.pools import GPU_RESOURCE
from components.planning.tolerations import tolerates
from components.tags import TAINTS
from policies.resources import (
    Resource,
    Stack,
    get,
    items,
    truthy,
)
from policies.rules.deployed_pools import Pool, interfaces, node_pools
from policies.rules.releases import required_releases, untolerated
from policies.rules.signatures import Config, StackViolations

#: Chart names of the Helm releases the rules look for, as pinned in components/catalog/versions.yaml.
NVIDIA_DEVICE_PLUGIN_CHART = chart("nvidia-device-plugin").chart
NVIDIA_DRA_DRIVER_CHART = chart("nvidia-dra-driver-gpu").chart


#: Tolerations the NVIDIA device plugin chart ships when `values.tolerations` is not set ([NVDP] values.yaml):
#: `CriticalAddonsOnly` Exists and `nvidia.com/gpu` Exists NoSchedule. Helm replaces lists, so setting
#: `tolerations` replaces these.
NVIDIA_DEVICE_PLUGIN_DEFAULT_TOLERATIONS: tuple[Mapping[str, str], ...] = (
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"},
)


def imdsv2_required(lt: Resource, config: Config) -> Iterator[str]:
    """Instance metadata needs session tokens (IMDSv2) and a small hop limit (FSBP EC2.170 for launch templates, EC2.8
    for the instances launched from them).

    IMDSv1 answers any request that reaches 169.254.169.254, which is how SSRF bugs leak node credentials;
    `httpTokens: required` turns it off (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-IMDS-new-instances.html).
    AWS recommends a hop limit of 2 in container environments, 1 to keep pods off the node's role entirely
    (same guide, "Instance metadata access considerations"); `maxHopLimit` sets the ceiling.
    """
    tokens = lt.get("metadataOptions", "httpTokens", default="optional")
    if tokens != "required":
        yield f"launch template '{lt.name}' allows IMDSv1 (metadataOptions.httpTokens is '{tokens}', not 'required')"
    hops = lt.get("metadataOptions", "httpPutResponseHopLimit")
    ceiling = config.get("maxHopLimit")
    if hops is not None and ceiling is not None and int(hops) > int(ceiling):
        yield f"launch template '{lt.name}' sets an IMDS hop limit of {hops}; at most {ceiling} is allowed"


#: The tag that justifies an IMDS hop limit above 1 on a launch template; the node pools set it from a pool's
#: `imdsHopLimitReason` (components.node_pool).
HOP_LIMIT_REASON_TAG = tags.IMDS_HOP_LIMIT_REASON


def imds_hop_limit_justified(lt: Resource, config: Config) -> Iterator[str]:
    """A launch template's IMDS hop limit stays at 1 unless its tag `gpu-clusters/imds-hop-limit-reason` says why
    pods must reach the node's metadata (related: Security Hub EC2.170, which asks launch templates for IMDSv2).

    With a hop limit of 2, every pod on the node can fetch the node role's credentials from IMDS; with 1, the reply
    never reaches a pod's network namespace, so pods use their own Pod Identity roles and nothing else
    (EKS best practices, "Restrict access to the instance profile assigned to the worker node",
    https://docs.aws.amazon.com/eks/latest/best-practices/identity-and-access-management.html). Some agents that
    run in pods without host networking need 2; the tag records that decision where reviewers see it.
    """
    hops = lt.get("metadataOptions", "httpPutResponseHopLimit")
    if hops is None or int(hops) <= 1:
        return
    if not {**dict(lt.default_tags), **lt.tags()}.get(HOP_LIMIT_REASON_TAG, "").strip():
        yield (
            f"launch template '{lt.name}' lets pods reach the node's credentials (IMDS hop limit {int(hops)}): set "
            f"metadataOptions.httpPutResponseHopLimit to 1, or tag it {HOP_LIMIT_REASON_TAG}=<why pods need IMDS>"
        )


def no_public_ip(lt: Resource, config: Config) -> Iterator[str]:
    """Nodes live in private subnets and never get a public IP address; they reach AWS through NAT or endpoints."""
    for nic in interfaces(lt):
        if nic.public_ip:
            yield (
                f"launch template '{lt.name}' asks for a public IP on network card {nic.card}, device {nic.device} "
                "(associatePublicIpAddress)"
            )


def encrypted_root_volume(lt: Resource, config: Config) -> Iterator[str]:
    """Every EBS volume of a node, the root volume first, is encrypted (with a KMS key when `requireKmsKey`).

    Without a block device mapping the root volume inherits the AMI snapshot's setting, which for the EKS AMIs is
    unencrypted unless the account turned on EBS encryption by default
    (https://docs.aws.amazon.com/ebs/latest/userguide/ebs-encryption.html); the policy cannot see that account
    setting, so the launch template has to say it.
    """
    mappings = [m for m in items(lt.get("blockDeviceMappings")) if get(m, "ebs") is not None]
    if not mappings:
        yield (
            f"launch template '{lt.name}' has no EBS block device mapping, "
            "so its root volume encryption is left to the AMI"
        )
        return
    for m in mappings:
        device = get(m, "deviceName", default="?")
        if not truthy(get(m, "ebs", "encrypted", default=False)):
            yield f"launch template '{lt.name}': EBS volume {device} is not encrypted"
        elif config.get("requireKmsKey", False) and not get(m, "ebs", "kmsKeyId"):
            yield f"launch template '{lt.name}': EBS volume {device} is encrypted without a KMS key (kmsKeyId)"


def _dra_driver_runs(stack: Stack, pools: list[Pool]) -> StackViolations:
    """DRA pools (tag `gpu-clusters/gpu-allocation: dra`) get their GPUs from NVIDIA's DRA driver, whose kubelet
    plugin must tolerate their taints (`kubeletPlugin.tolerations`; the chart's default tolerates nothing, [DRAGPU])."""
    if not pools:
        return
    releases = yield from required_releases(stack, NVIDIA_DRA_DRIVER_CHART, pools, "DRA GPU")
    if not releases:
        return
    for release in releases:
        tolerations = items(get(release.get("values", default={}), "kubeletPlugin", "tolerations"))
        for pool in pools:
            for taint in pool.taints:
                if taint.effect in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
                    yield (
                        f"Helm release '{release.name}' ({NVIDIA_DRA_DRIVER_CHART}) does not tolerate taint {taint} "
                        f"of DRA pool '{pool.name}', so its kubelet plugin never runs there",
                        release.urn,
                    )


def gpu_pools_tainted_and_tolerated(stack: Stack, config: Config) -> StackViolations:
    """GPU pools repel ordinary pods with a NoSchedule/NoExecute taint, and their allocator tolerates it: the NVIDIA
    device plugin, or on DRA pools the DRA driver's kubelet plugin.

    Untainted GPU nodes fill up with CPU-only pods that block GPU jobs and keep costly nodes from scaling down;
    a device plugin that does not tolerate the taint never advertises `nvidia.com/gpu` and no GPU pod schedules.
    The chart's default tolerations cover only `nvidia.com/gpu` and CriticalAddonsOnly ([NVDP], facts §8).
    """
    pools = [p for p in node_pools(stack) if p.is_gpu]
    for pool in pools:
        if not any(t.effect in ("NoSchedule", "NoExecute") for t in pool.taints):
            yield (
                f"GPU pool '{pool.name}' has no NoSchedule/NoExecute taint (tag {TAINTS})",
                pool.asg.urn,
            )
    yield from _dra_driver_runs(stack, [p for p in pools if p.dra])
    gpu_pools = [p for p in pools if not p.dra]
    if not gpu_pools:
        return
    releases = yield from required_releases(stack, NVIDIA_DEVICE_PLUGIN_CHART, gpu_pools, "GPU")
    if not releases:
        return
    yield from untolerated(gpu_pools, releases, NVIDIA_DEVICE_PLUGIN_DEFAULT_TOLERATIONS)
