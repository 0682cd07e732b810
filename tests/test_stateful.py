"""One protection rule for every resource whose loss loses data (components.planning.stateful)."""

from __future__ import annotations

from typing import Any

import pytest

from blueprint.plan.runner import list_stacks
from components.planning.stateful import STATEFUL_KINDS, Protection, stateful_protection
from tests.builders import shipped_plan


def test_every_stateful_kind_is_protected_and_kept_by_default() -> None:
    assert stateful_protection(True) == {
        kind: Protection(protect=True, retain_on_delete=True) for kind in STATEFUL_KINDS
    }


def test_opting_out_lets_destroy_delete_every_stateful_kind() -> None:
    assert stateful_protection(False) == {
        kind: Protection(protect=False, retain_on_delete=False) for kind in STATEFUL_KINDS
    }


KEY = "aws:kms/key:Key"
#: Resource types that hold data, and the property naming the key they are encrypted with; a bucket names its key
#: through its server-side encryption configuration.
ENCRYPTED_DATA = {
    "aws:fsx/lustreFileSystem:LustreFileSystem": "kmsKeyId",
    "aws:efs/fileSystem:FileSystem": "kmsKeyId",
}
BUCKET = "aws:s3/bucket:Bucket"
BUCKET_ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"


@pytest.mark.parametrize("stack", list_stacks())
def test_a_kept_file_system_or_bucket_keeps_the_key_that_decrypts_it(stack: str) -> None:
    """`pulumi destroy` leaving the data but deleting its key would leave data nobody can read: whatever keeps a
    file system or bucket keeps its KMS key too."""
    resources = shipped_plan(stack)["resources"]
    by_urn = {r["urn"]: r for r in resources}

    def keys(r: dict[str, Any], prop: str) -> list[dict[str, Any]]:
        urns = r.get("propertyDependencies", {}).get(prop, [])
        return [by_urn[u] for u in urns if by_urn[u]["type"] == KEY]

    pairs = [(r, key) for r in resources if r["type"] in ENCRYPTED_DATA for key in keys(r, ENCRYPTED_DATA[r["type"]])]
    for sse in (r for r in resources if r["type"] == BUCKET_ENCRYPTION):
        buckets = [by_urn[u] for u in sse["propertyDependencies"].get("bucket", []) if by_urn[u]["type"] == BUCKET]
        pairs += [(bucket, key) for bucket in buckets for key in keys(sse, "rules")]
    assert pairs, "every shipped stack keeps data encrypted with its own key"
    for data, key in pairs:
        for option in ("protect", "retainOnDelete"):
            if data["options"][option]:
                assert key["options"][option], f"{data['name']} is kept ({option}) but its key {key['name']} is not"
