"""One protection rule for every resource whose loss loses data (components.planning.stateful)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from blueprint.plan.runner import list_stacks
from components.planning import stateful as stateful_module
from components.planning.stateful import STATEFUL_KINDS, Protection, stateful_protection
from tests.builders import BUCKET, EFS, KMS_KEY, LUSTRE, shipped_plan


def test_every_stateful_kind_is_protected_and_kept_by_default() -> None:
    assert stateful_protection(True) == {
        kind: Protection(protect=True, retain_on_delete=True) for kind in STATEFUL_KINDS
    }


def test_opting_out_lets_destroy_delete_every_stateful_kind() -> None:
    assert stateful_protection(False) == {
        kind: Protection(protect=False, retain_on_delete=False) for kind in STATEFUL_KINDS
    }


KEY = KMS_KEY
#: Resource types that hold data, and the property naming the key they are encrypted with; a bucket names its key
#: through its server-side encryption configuration.
ENCRYPTED_DATA = {
    LUSTRE: "kmsKeyId",
    EFS: "kmsKeyId",
}
BUCKET_ENCRYPTION = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"


@pytest.mark.program
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


OPERATIONS = Path(__file__).resolve().parents[1] / "docs" / "operations.md"


def _destroy_section() -> str:
    text = OPERATIONS.read_text()
    start = text.index("## Stateful resources and `pulumi destroy`")
    return text[start : text.index("\n## ", start + 1)]


@pytest.mark.program
def test_a_lustre_file_system_is_deleted_before_the_destroy_because_its_network_is_not_kept() -> None:
    """A Lustre file system kept through `pulumi destroy` holds network interfaces in the stack's subnet behind its
    security group, so deleting those fails (DependencyViolation). The stack keeps no network for it; the documented
    procedure saves the data, deletes the file system, refreshes it out of the state, and only then destroys."""
    resources = shipped_plan("training")["resources"]
    by_urn = {r["urn"]: r for r in resources}
    (lustre,) = [r for r in resources if r["type"] == LUSTRE]
    placed_by = lustre["propertyDependencies"]
    network = [by_urn[u] for prop in ("subnetIds", "securityGroupIds") for u in placed_by[prop]]
    assert network and not any(r["options"]["retainOnDelete"] for r in network)
    section = _destroy_section()
    steps = ["create-data-repository-task", "create-backup", "delete-file-system", "pulumi refresh", "pulumi destroy`:"]
    positions = [section.index(step, section.index("does not work for an FSx for Lustre")) for step in steps]
    assert positions == sorted(positions), "save the data, delete the file system, refresh, then destroy"
    assert "DependencyViolation" in section
    assert "the file system deleted before the destroy" in (stateful_module.__doc__ or "")
