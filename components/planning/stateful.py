"""What `pulumi destroy` may delete: one rule for every resource whose loss loses data.

File systems (FSx for Lustre, EFS), buckets (the Lustre data bucket) and KMS keys (the cluster key, the alerts
topic key) hold or unlock data. With `cluster.protectStateful: true` (the default) each of them is `protect`ed, so
`pulumi destroy` and a replacement refuse to delete it, and `retainOnDelete`, so removing it from the program (or
destroying after lifting the protection without `pulumi up`) leaves it in the account. With `false` neither option
is set and `pulumi destroy` deletes them like anything else (throwaway stacks). Every kind takes the one setting, so
a kept file system or bucket always keeps the key that decrypts it (data without its key is lost all the same).

A kept FSx for Lustre file system cannot outlive the stack's network: its network interfaces sit in a private subnet
behind the stack's security group for as long as it exists. A `pulumi destroy` that keeps it therefore fails at that
security group and, in a VPC the stack created, at the subnet and the VPC (DependencyViolation), after the cluster
is gone, with the file system still billing. The network is not kept with it (that would keep NAT gateways and a
VPC for a file system nobody mounts); instead the data is kept and the file system deleted before the destroy:
export what is not yet in the data bucket (automatic export drained, or an export data repository task) or, when
it is not linked to S3, take a backup; delete the file system; refresh the stack so it leaves the state; then
destroy [FSXDEL]. EFS has no such problem: its mount targets are not kept, so its interfaces leave with them.
docs/operations.md ("Stateful resources and `pulumi destroy`") gives the commands.

The components take their options from `stateful_protection`, the plan summary and the policy pack read the same
kinds, so what docs/operations.md promises is kept in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

StatefulKind = Literal["file-system", "bucket", "kms-key"]
#: Every kind of resource that holds or unlocks data.
STATEFUL_KINDS: tuple[StatefulKind, ...] = ("file-system", "bucket", "kms-key")


@dataclass(frozen=True)
class Protection:
    """Pulumi's resource options for one stateful kind (`ResourceOptions(protect=..., retain_on_delete=...)`)."""

    protect: bool
    retain_on_delete: bool


def stateful_protection(protect_stateful: bool) -> Mapping[StatefulKind, Protection]:
    """The options of every stateful kind: protected and kept on delete, unless the stack opts out of both."""
    return {kind: Protection(protect=protect_stateful, retain_on_delete=protect_stateful) for kind in STATEFUL_KINDS}
