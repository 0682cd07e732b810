"""The NVIDIA container runtime on hybrid GPU nodes (pure, no Pulumi): which pools need the RuntimeClass, and the
commands that give each server the runtime.

The hybrid build of nodeadm leaves containerd's default runtime `runc`, so each server registers the `nvidia` runtime
with `nvidia-ctk runtime configure` as a drop-in that nodeadm's config imports, after `nodeadm init`. Why and
sources: docs/design-notes.md#the-nvidia-runtime-on-hybrid-nodes; the steps:
docs/operations.md#7-give-containerd-the-nvidia-runtime.
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
