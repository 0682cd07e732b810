"""What `pulumi destroy` may delete: one rule for every resource whose loss loses data.

File systems, buckets and KMS keys are `protect`ed and `retainOnDelete` with `cluster.protectStateful: true` (the
default), and neither with `false`; every kind takes the one setting, so kept data keeps its key. A kept FSx for
Lustre file system would block destroying its network, so the data is kept and
the file system deleted before the destroy [FSXDEL]. Components, plan summary and policy pack read the same kinds.
See docs/operations.md#stateful-resources-and-pulumi-destroy.
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
