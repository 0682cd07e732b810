"""The environment NCCL and libfabric need to run collectives over EFA, derived from the instance type's catalog
entry (pure, no Pulumi). One place for it: the reference training job and `blueprint verify`'s NCCL check read it.

Sources: AWS's EFA nccl-tests run on EKS ([ADTNCCL] kubernetes/nccl-tests.yaml: `FI_PROVIDER=efa`,
`FI_EFA_FORK_SAFE=1`, its buffer and chunk sizes) and the EFA user guide ([EFADOC]: GPUDirect RDMA on the types that
support it, `FI_EFA_USE_DEVICE_RDMA=1`). docs/training.md#the-reference-job shows the result for p5.
"""

from __future__ import annotations

from components.catalog import InstanceType

#: NCCL's buffer and network chunk sizes of AWS's published p5 run ([ADTNCCL]).
NCCL_SIZES: dict[str, str] = {"NCCL_BUFFSIZE": "8388608", "NCCL_P2P_NET_CHUNKSIZE": "524288"}


def nccl_environment(instance: InstanceType) -> dict[str, str]:
    """libfabric on the EFA provider (fork-safe, as PyTorch's data loaders fork), GPUDirect RDMA where the type has
    it, and AWS's NCCL sizes. Empty for a type without EFA: NCCL then uses its sockets, and nothing here applies."""
    if not instance.efa_supported:
        return {}
    env = {"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1"}
    if instance.gpudirect_rdma:
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return {**env, **NCCL_SIZES}
