"""The NVIDIA container runtime on hybrid GPU nodes (pure, no Pulumi): which pools need the RuntimeClass, and the
commands that give each server the runtime and keep its containers' GPUs through a `systemctl daemon-reload`.

The hybrid build of nodeadm leaves containerd's default runtime `runc`, so each server registers the `nvidia` runtime
with `nvidia-ctk runtime configure` as a drop-in that nodeadm's config imports, after `nodeadm init`. Why and
sources: docs/design-notes.md#the-nvidia-runtime-on-hybrid-nodes; the steps:
docs/operations.md#7-give-containerd-the-nvidia-runtime.

With the systemd cgroup driver (nodeadm's) and the legacy injection path (the device plugin's default `envvar`
device list), a `systemctl daemon-reload` makes systemd re-apply each container's device allow-list from
`/dev/char/<major>:<minor>` links the NVIDIA driver never creates, so running containers lose their GPUs ("Failed to
initialize NVML: Unknown Error"). NVIDIA's documented fix is to create those links (`nvidia-ctk system
create-dev-char-symlinks --create-all`) now and, through a udev rule, every time the driver loads
(NVIDIA/nvidia-container-toolkit issue 48; the toolkit's troubleshooting page; [NVML48]): `device_symlink_commands`.
Why: docs/operations.md#gpus-and-systemctl-daemon-reload.
"""

from __future__ import annotations

from collections.abc import Iterable

from components.planning.pools import PoolPlan

#: The RuntimeClass the stack registers and the containerd runtime handler it names (`nvidia-ctk`'s default name).
NVIDIA_RUNTIME_CLASS = "nvidia"
NVIDIA_RUNTIME_HANDLER = "nvidia"
#: Where `nvidia-ctk` writes the runtime: inside the directory nodeadm's containerd config imports.
NVIDIA_CONTAINERD_DROP_IN = "/etc/containerd/config.d/99-nvidia.toml"
#: NVIDIA's command that links every NVIDIA device node under /dev/char (toolkit v1.12.0 and later).
DEV_CHAR_SYMLINKS = "nvidia-ctk system create-dev-char-symlinks --create-all"
#: Where the toolkit packages install nvidia-ctk: udev runs a rule's program by absolute path.
NVIDIA_CTK_PATH = "/usr/bin/nvidia-ctk"
#: The file and rule NVIDIA gives for running it whenever the driver binds (toolkit issue 48, "Workarounds").
DEV_CHAR_RULE_FILE = "/lib/udev/rules.d/71-nvidia-dev-char.rules"
DEV_CHAR_RULE = (
    'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", '
    f'RUN+="{DEV_CHAR_SYMLINKS.replace("nvidia-ctk", NVIDIA_CTK_PATH, 1)}"'
)


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


def device_symlink_commands(rule_file: str = DEV_CHAR_RULE_FILE) -> list[str]:
    """What each hybrid GPU server runs as root so its containers keep their GPUs through a `systemctl
    daemon-reload`: install NVIDIA's udev rule (the links come back whenever the driver loads, e.g. after a reboot)
    and create the links now. `rule_file` is for tests."""
    return [f"printf '%s\\n' '{DEV_CHAR_RULE}' > {rule_file}", DEV_CHAR_SYMLINKS]


def gpu_server_commands(plan: PoolPlan) -> list[str]:
    """Every command a hybrid GPU server runs after `nodeadm init`: the containerd runtime, then the /dev/char
    links."""
    return [*containerd_runtime_commands(plan), *device_symlink_commands()]
