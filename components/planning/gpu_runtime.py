"""The NVIDIA container runtime on hybrid GPU nodes (pure, no Pulumi): which pools need the RuntimeClass, and the
commands that give each server the runtime.

On the EKS NVIDIA AMIs nodeadm makes `nvidia` containerd's default runtime ([AMI]
nodeadm/internal/containerd/runtime_config_nvidia.go). The hybrid build of nodeadm does not: it writes containerd's
config with `default_runtime_name = "runc"` and imports `/etc/containerd/config.d/*.toml` (aws/eks-hybrid
internal/containerd/config.template.toml @e5f42ca), so on an on-prem server a container sees no GPU and the device
plugin advertises none until the NVIDIA runtime is configured.

The runtime is registered on the server by the NVIDIA Container Toolkit's `nvidia-ctk runtime configure
--runtime=containerd` (NVIDIA/nvidia-container-toolkit cmd/nvidia-ctk/runtime/configure @v1.19.1), which adds a
runtime named `nvidia` (`--nvidia-runtime-name`, default `nvidia`) and, with `--set-as-default`, makes it the
default. It writes a drop-in (`--drop-in-config`) starting from a copy of the whole CRI plugin section of
`/etc/containerd/config.toml`, because containerd before 2.1 replaces a plugin section from an import instead of
merging it (pkg/config/engine/containerd/containerd.go, containerd/containerd#5837). So it runs after `nodeadm
init` has written that file (sandbox image, systemd cgroups), and again after every `nodeadm init` or upgrade; the
drop-in goes into the directory nodeadm's config imports, so nodeadm's rewrite of `config.toml` keeps it imported.
The NodeConfig's `containerd.config` is not used for the same reason: a drop-in carrying the CRI plugin's runtimes
but not nodeadm's sandbox image (resolved per Region by nodeadm) would drop it on containerd 1.7.
"""

from __future__ import annotations

from collections.abc import Iterable

from components.planning.pools import PoolPlan

#: The RuntimeClass the stack registers and the containerd runtime handler it names (`nvidia-ctk`'s default name).
NVIDIA_RUNTIME_CLASS = "nvidia"
NVIDIA_RUNTIME_HANDLER = "nvidia"
#: Where `nvidia-ctk` writes the runtime: inside the directory nodeadm's containerd config imports.
NVIDIA_CONTAINERD_DROP_IN = "/etc/containerd/config.d/99-nvidia.toml"


def runtime_class_plans(plans: Iterable[PoolPlan]) -> list[PoolPlan]:
    """Hybrid pools whose GPU pods name the `nvidia` RuntimeClass (`gpuRuntime: runtime-class`), in config order.

    Cloud pools never do: their AMI makes the NVIDIA runtime the default (Bottlerocket NVIDIA variants likewise).
    """
    return [p for p in plans if p.kind == "hybrid" and p.is_gpu and p.pool.gpu_runtime == "runtime-class"]


def containerd_runtime_commands(plan: PoolPlan) -> list[str]:
    """What each server of a hybrid GPU pool runs as root after `nodeadm init`, to give containerd the `nvidia`
    runtime: as an extra handler (`runtime-class`) or as the default (`default-runtime`)."""
    configure = (
        f"nvidia-ctk runtime configure --runtime=containerd --nvidia-runtime-name={NVIDIA_RUNTIME_HANDLER} "
        f"--drop-in-config={NVIDIA_CONTAINERD_DROP_IN}"
    )
    if plan.pool.gpu_runtime == "default-runtime":
        configure += " --set-as-default"
    return [configure, "systemctl restart containerd"]
