"""What the serving docs and queries say about pods holds: the weights-loading pod of docs/operations.md schedules
on a pool that mounts the claim (its tolerations are the plan's taints of that pool) and passes Pod Security
`restricted`; the serving queries' pod regex matches the Deployment's pods and nothing else."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from blueprint.verify.expectations import expectations, load_spec
from components import tags
from components.planning.serving_autoscaling import deployment_pods
from tests.charts.rendering import level_violations
from tests.doc_blocks import ROOT

OPERATIONS = ROOT / "docs" / "operations.md"


def weights_pod() -> dict[str, Any]:
    text = OPERATIONS.read_text()
    found = re.search(r"kubectl -n inference run weights .*?--overrides='(?P<json>\{.*?\})'\n", text, re.S)
    assert found, "the weights-loading example is not in docs/operations.md"
    return dict(json.loads(found.group("json")))


def test_the_weights_pod_tolerates_the_pool_it_mounts_the_claim_from() -> None:
    spec = weights_pod()["spec"]
    claim = spec["volumes"][0]["persistentVolumeClaim"]["claimName"]
    fs = next(s for s in expectations(load_spec("inference", None)).storage if s.claim == claim)
    pool_name = spec["nodeSelector"][tags.POOL]
    assert pool_name in fs.pools
    pool = expectations(load_spec("inference", None)).pool(pool_name)
    assert pool is not None and pool.tolerations  # every pool is tainted: without tolerations it stays Pending
    assert spec["tolerations"] == [dict(t) for t in pool.tolerations]


def test_the_weights_pod_is_admitted_in_a_restricted_namespace() -> None:
    spec = weights_pod()["spec"]
    assert level_violations(spec, "restricted") == []
    assert spec["securityContext"]["runAsUser"] == 1000  # the server's UID, which must read the files


@pytest.mark.parametrize(
    ("pod", "matches"),
    [
        ("chat-7d9f8b6c5d-x2k9q", True),  # the Deployment's pod: <replicaset hash>-<suffix>
        ("chat-5c7b9-4xq2m", True),
        ("chat-weights-loader", False),  # a bare pod or Job with words for names
        ("chat-warmup-x2k9q", False),  # a Job `chat-warmup`'s pod
        ("chat-large-7d9f8b6c5d-x2k9q", False),  # Deployment `chat-large`
        ("chat-v2-7d9f8b6c5d-x2k9q", False),  # Deployment `chat-v2`
        ("chat-7d9f8b6c5d-x2k9", False),  # suffix is always 5 characters
        ("chat-0", False),  # a StatefulSet `chat`'s pod
        ("mychat-7d9f8b6c5d-x2k9q", False),  # PromQL anchors the regex
    ],
)
def test_the_serving_pod_regex_matches_the_deployments_pods_only(pod: str, matches: bool) -> None:
    assert bool(re.fullmatch(deployment_pods("chat"), pod)) is matches
