"""The EFS file system's resource policy (pure, no Pulumi): mounts only through the VPC's mount targets, only over
TLS, and never as root.

Without a file system policy EFS grants every NFS client that reaches a mount target full access, root included
(EFS user guide, "Using IAM to control access to file systems",
https://docs.aws.amazon.com/efs/latest/ug/iam-access-control-nfs-efs.html). The policy is the combination of the
console's preconfigured options "Prevent root access by default" (no `ClientRootAccess` allowed) and "Enforce
in-transit encryption for all clients" (EFS user guide, "Creating file system policies",
https://docs.aws.amazon.com/efs/latest/ug/create-file-system-policy.html).

What it leaves working: the EFS CSI driver mounts each claim through an EFS access point, and its node plugin mounts
access points with `tls` always and every volume with TLS unless `encryptInTransit: false` is set
(kubernetes-sigs/aws-efs-csi-driver pkg/driver/node.go; our StorageClass does not turn it off). The driver mounts
without the `iam` option, so its mounts are anonymous and match the `*` principal; the access point sets the POSIX
user, so no client needs root. Docs: docs/security.md#data.
"""

from __future__ import annotations

from typing import Any

#: What an NFS client may do through a mount target: mount and write, not `elasticfilesystem:ClientRootAccess`.
CLIENT_ACTIONS = ("elasticfilesystem:ClientMount", "elasticfilesystem:ClientWrite")
#: The EFS condition key true only for mounts through a mount target of the file system
#: (https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelasticfilesystem.html).
VIA_MOUNT_TARGET = "elasticfilesystem:AccessedViaMountTarget"


def efs_file_system_policy(file_system_arn: str) -> dict[str, Any]:
    """The file system policy: clients mount and write through mount targets; nothing over plain NFS."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "MountAndWriteThroughMountTargetsNoRoot",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": list(CLIENT_ACTIONS),
                "Resource": file_system_arn,
                "Condition": {"Bool": {VIA_MOUNT_TARGET: "true"}},
            },
            {
                "Sid": "DenyWithoutTls",
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": "*",
                "Resource": file_system_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }
