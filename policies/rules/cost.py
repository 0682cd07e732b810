"""Cost rules: cost-allocation tags on every taggable resource, and a GPU and dollar budget at maximum size
(prices from the catalog, [KPP] in docs/sources.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from policies import aws_resource_types
from policies.resources import (
    Resource,
    Stack,
    tag_map,
)
from policies.rules.deployed_pools import node_pools
from policies.rules.signatures import Config, StackViolations


def taggable(resource_type: str) -> bool | None:
    """Whether the AWS provider's resource takes `tags` (None if the provider SDK has no such resource), as the
    pinned SDK says (policies/aws_resource_types.py: importing its modules here cost a second a run)."""
    entry = aws_resource_types.by_token().get(resource_type)
    return None if entry is None else bool(entry["tags"])


def cost_allocation_tags(r: Resource, config: Config) -> Iterator[str]:
    """Every taggable AWS resource carries the cost-allocation tags listed in `requiredTags`.

    AWS cost allocation reports group spend only by tags that are on the resource
    (https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/cost-alloc-tags.html); provider `defaultTags`
    count.
    """
    if not r.type.startswith("aws:"):
        return
    present = {**r.default_tags, **tag_map(r.get("tagsAll")), **r.tags()}
    if not present and r.get("tags") is None and taggable(r.type) is not True:
        return  # a type without tags (or one the provider SDK does not describe)
    missing = [t for t in config.get("requiredTags") or [] if not present.get(t)]
    if missing:
        yield f"{r.type.split(':')[-1]} '{r.name}' lacks the cost-allocation tags {', '.join(missing)}"


def gpu_budget(stack: Stack, config: Config) -> StackViolations:
    """At maximum size the stack's node pools stay within `maxGpus` GPUs and `maxUsdPerHour` dollars an hour.

    Counts every Auto Scaling group (or managed node group) at `maxSize`, each at the GPU count and us-east-1
    on-demand price of its largest / dearest instance type in the catalog ([KPP]); spot and reservations cost less,
    so this is an upper bound. A pool whose type has no catalog price cannot be bounded and is reported.
    """
    max_gpus, max_usd = config.get("maxGpus"), config.get("maxUsdPerHour")
    total_gpus, total_usd = 0, 0.0
    for pool in node_pools(stack):
        size = pool.max_size
        entries = pool.catalog_entries()
        if not entries:
            if size > 0:
                yield (f"pool '{pool.name}': instance types {pool.instance_types} are not in the catalog", pool.asg.urn)
            continue
        total_gpus += size * max(e.gpu_count for e in entries)
        prices = [e.on_demand_usd_per_hour for e in entries]
        known = [p for p in prices if p is not None]
        if size > 0 and max_usd is not None and len(known) < len(prices):
            yield (f"pool '{pool.name}': the catalog has no on-demand price for {pool.instance_types}", pool.asg.urn)
        total_usd += size * max(known, default=0.0)
    if max_gpus is not None and total_gpus > int(max_gpus):
        yield (f"the node pools reach {total_gpus} GPUs at maximum size; the budget is {max_gpus}", None)
    if max_usd is not None and total_usd > float(max_usd):
        yield (
            f"the node pools cost ${total_usd:,.2f}/hour at maximum size; the budget is ${float(max_usd):,.2f}",
            None,
        )
