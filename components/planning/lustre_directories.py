"""The directory each workload namespace gets on the Lustre file system, and the boot script that makes it (pure,
no Pulumi).

A new file system's root, and directories imported from S3 without POSIX metadata, belong to root with mode 0755
(FSx for Lustre guide, https://docs.aws.amazon.com/fsx/latest/LustreGuide/posix-metadata-support.html), so a pod
held to Pod Security `restricted` (never root) cannot write anywhere. Every Lustre client node therefore runs, as
root and before its kubelet starts, a script that mounts the file system at a temporary path, creates `/<namespace>`
owned by the configured numeric `uid:gid` with the configured mode when it is absent, and unmounts. A deploy-time
Job could not do this: the client pools scale from zero, so it might find no node and hold `pulumi up`. Why and how
pods use it: docs/storage.md#writable-directories-on-lustre.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from components.config import LustreConfig

#: The mount options of the FSx for Lustre guide's mount command ("Mounting from an Amazon EC2 instance",
#: https://docs.aws.amazon.com/fsx/latest/LustreGuide/mounting-ec2-instance.html): `mount -t lustre -o relatime,flock
#: <dns name>@tcp:/<mount name>`, the source the CSI driver mounts for the stack's PersistentVolume too.
BOOT_MOUNT_OPTIONS = ("relatime", "flock")
#: The Amazon Linux 2023 package with `mount.lustre` and the client modules; the EKS AL2023 AMI's build does not
#: install it (awslabs/amazon-eks-ami templates/al2023/provisioners/install-worker.sh), so the script does when
#: `mount.lustre` is missing.
CLIENT_PACKAGE = "lustre-client"
#: Where the script mounts the file system for the moment it needs it; nothing else uses the path.
BOOT_MOUNT_POINT = "/run/gpu-clusters/lustre"
#: How long the script waits for the mount before it gives up, so a file system that cannot be reached delays the
#: node's boot by at most this much (the node still joins; pods then find no directory).
MOUNT_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class WorkloadDirectory:
    """One namespace's directory: its path from the file system's root, owner, group and octal mode."""

    namespace: str
    uid: int
    gid: int
    mode: str

    @property
    def path(self) -> str:
        return f"/{self.namespace}"


def workload_directories(config: LustreConfig) -> list[WorkloadDirectory]:
    """The directories of the namespaces that mount the file system (its claim's), none when switched off."""
    settings = config.workload_directories
    if not settings.enabled:
        return []
    return [WorkloadDirectory(config.kubernetes.namespace, settings.uid, settings.gid, settings.mode)]


def workload_directory_script(
    dns_name: str, mount_name: str, directories: list[WorkloadDirectory], mount_point: str = BOOT_MOUNT_POINT
) -> str:
    """The cloud-init script of a Lustre client node: mount, create each directory that is absent, unmount.

    A directory is built under a temporary name, given its owner and mode, then renamed into place with `mv -T`,
    which refuses to replace a directory that has files: two nodes booting at once cannot leave a root-owned or
    half-made directory, and an existing tree is never changed. With root squash on (and the node not among the
    no-squash clients) root acts as the squash user and cannot create anything in the root-owned top directory:
    the script says so and the node joins anyway.
    """
    source = f"{dns_name}@tcp:/{mount_name}"
    lines = [
        "#!/bin/bash",
        "# Workload directories on FSx for Lustre, one per namespace (docs/storage.md#writable-directories-on-lustre).",
        "set -uo pipefail",
        f"mnt={shlex.quote(mount_point)}",
        'mkdir -p "$mnt"',
        f"command -v mount.lustre >/dev/null || dnf install -y {CLIENT_PACKAGE}",
        f"if ! timeout {MOUNT_TIMEOUT_SECONDS} mount -t lustre -o {','.join(BOOT_MOUNT_OPTIONS)} "
        f'{shlex.quote(source)} "$mnt"; then',
        '  echo "lustre workload directories: cannot mount the file system; none created" >&2',
        "  exit 1",
        "fi",
        "status=0",
    ]
    for directory in directories:
        target = shlex.quote(directory.path.lstrip("/"))
        lines += [
            f'if [ ! -e "$mnt/{target}" ]; then',
            f'  tmp="$mnt/.{directory.namespace}.$(hostname).$$"',
            f'  if mkdir "$tmp" && chown {directory.uid}:{directory.gid} "$tmp" && chmod {directory.mode} "$tmp"; then',
            f'    mv -T "$tmp" "$mnt/{target}" 2>/dev/null || rmdir "$tmp"',
            "  else",
            f'    echo "lustre workload directories: cannot create {directory.path} (root squash?)" >&2',
            '    rmdir "$tmp" 2>/dev/null',
            "    status=1",
            "  fi",
            "fi",
        ]
    lines += ['umount "$mnt"', "exit $status", ""]
    return "\n".join(lines)
