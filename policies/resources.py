"""A small read-only view of the resources a policy judges, and how one resource finds the ones it references.

The policy SDK hands resource policies a `ResourceValidationArgs` and stack policies a list of `PolicyResource`s,
with properties wrapped in `unknown_checking_proxy` (a `Mapping`/`Sequence` look-alike that raises
`UnknownValueError` when a value is not known yet during a preview). The rules in `policies.rules` work on the
`Resource` defined here so that they read the same whether they run under `pulumi preview`, in `blueprint check`
over the offline plan, or in a unit test.

References between resources (a launch template's security groups, an Auto Scaling group's launch template and
subnets, a bucket's versioning configuration) are resolved the most reliable way available, in this order:

1. the property dependencies the engine records (`propertyDependencies`): exact, and known even during a preview
   of a new stack, when the referenced ids themselves are still unknown;
2. equality of the referenced value with the target's `id`, `arn` or `name` (stack policies see outputs, which
   carry the id; the offline plan adds it when it has one);
3. the referencing resource's dependencies (every resource whose output it consumed), filtered by type.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pulumi_policy import PolicyResource, ResourceValidationArgs
from pulumi_policy.proxy import UnknownValueError

T = TypeVar("T")

# Resource type tokens (pulumi-aws 7 / pulumi-kubernetes 4), named once.
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AUTOSCALING_GROUP = "aws:autoscaling/group:Group"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
SUBNET = "aws:ec2/subnet:Subnet"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
SG_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
SG_EGRESS_RULE = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
EFS = "aws:efs/fileSystem:FileSystem"
KMS_KEY = "aws:kms/key:Key"
BUCKETS = frozenset({"aws:s3/bucket:Bucket", "aws:s3/bucketV2:BucketV2"})
BUCKET_VERSIONING = frozenset(
    {"aws:s3/bucketVersioning:BucketVersioning", "aws:s3/bucketVersioningV2:BucketVersioningV2"}
)
BUCKET_ENCRYPTION = frozenset(
    {
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
    }
)
BUCKET_PUBLIC_ACCESS_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
HELM_CHART_V4 = "kubernetes:helm.sh/v4:Chart"
HELM_TYPES = frozenset({HELM_RELEASE, HELM_CHART_V4})


@dataclass(frozen=True)
class Resource:
    """One resource as a rule sees it. `props` may be an `unknown_checking_proxy`; read it through `get`."""

    type: str
    name: str
    urn: str
    props: Mapping[str, Any]
    protect: bool = False
    parent: str | None = None
    dependencies: tuple[str, ...] = ()
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: Tags the AWS provider adds to every resource it manages (`defaultTags`), when the provider is known.
    default_tags: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: ResourceValidationArgs) -> Resource:
        provider_tags = tag_map(get(args.provider.props, "defaultTags", "tags")) if args.provider else {}
        return cls(
            type=args.resource_type,
            name=args.name,
            urn=args.urn,
            props=args.props,
            protect=bool(args.opts.protect),
            parent=args.opts.parent,
            default_tags=provider_tags,
        )

    @classmethod
    def from_policy_resource(cls, r: PolicyResource) -> Resource:
        return cls(
            type=r.resource_type,
            name=r.name,
            urn=r.urn,
            props=r.props,
            protect=bool(r.opts.protect),
            parent=r.parent.urn if r.parent is not None else r.opts.parent,
            dependencies=tuple(d.urn for d in r.dependencies),
            property_dependencies={k: tuple(d.urn for d in v) for k, v in r.property_dependencies.items()},
            default_tags=tag_map(get(r.provider.props, "defaultTags", "tags")) if r.provider else {},
        )

    def get(self, *path: str | int, default: Any = None) -> Any:
        return get(self.props, *path, default=default)

    def tags(self) -> dict[str, str]:
        """The resource's own tags (a copy). Read once: stack rules ask a pool's group for its tags many times."""
        read = self.__dict__.get("_tags")
        if read is None:
            read = tag_map(self.get("tags"))
            self.__dict__["_tags"] = read  # frozen, but the tags it was built with never change
        return dict(read)


def get(value: Any, *path: str | int, default: Any = None) -> Any:
    """`value[path[0]][path[1]]...`, or `default` when any step is missing or None.

    Unknown values (during a preview) still raise `UnknownValueError`: the SDK turns that into an advisory
    "can't run policy during preview" note instead of a wrong verdict.
    """
    for key in path:
        if isinstance(key, int):
            if not is_list(value) or not -len(value) <= key < len(value):
                return default
            value = value[key]
        else:
            if not isinstance(value, Mapping):
                return default
            try:  # one lookup: `key in value` on the SDK's proxy is itself a lookup
                value = value[key]
            except KeyError:
                return default
        if value is None:
            return default
    return value


def peek(value: Any, *path: str | int, default: Any = None) -> Any:
    """Like `get`, but an unknown value reads as `default`: for ids used only to link resources, where the
    engine's property dependencies already say what is linked during a preview."""
    try:
        return get(value, *path, default=default)
    except UnknownValueError:
        return default


def is_list(value: Any) -> bool:
    """Lists arrive as `list` from plain dicts and as a `Sequence` proxy from the SDK; strings are not lists."""
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def items(value: Any) -> list[Any]:
    """The elements of a list property, or [] when it is absent."""
    return list(value) if is_list(value) else []


def truthy(value: Any) -> bool:
    """Booleans as the AWS provider takes them: launch templates type several flags as strings ("true")."""
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def tag_map(tags: Any) -> dict[str, str]:
    """Tags as a dict, from either a `{key: value}` map or the Auto Scaling list form `[{key, value, ...}]`."""
    if isinstance(tags, Mapping):
        return {str(k): str(v) for k, v in tags.items() if v is not None}
    out: dict[str, str] = {}
    for tag in items(tags):
        if not isinstance(tag, Mapping):
            continue
        try:
            key = tag["key"]
        except KeyError:
            continue
        out[str(key)] = str(get(tag, "value", default=""))
    return out


def strings(value: Any) -> list[str]:
    """A string or a list of strings as a list of the known strings (unknown elements are skipped)."""
    if isinstance(value, str):
        return [value]
    out = []
    for i in range(len(value) if is_list(value) else 0):
        try:
            element = value[i]
        except UnknownValueError:
            continue
        if isinstance(element, str):
            out.append(element)
    return out


class Stack:
    """Every resource of a stack, indexed by URN and type, with reference resolution (see the module docstring)."""

    def __init__(self, resources: Iterable[Resource]) -> None:
        self.resources = list(resources)
        self.by_urn = {r.urn: r for r in self.resources}
        #: Per type, the positions of its resources in `resources`.
        self._by_type: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(self.resources):
            self._by_type[r.type].append(i)
        self._derived: dict[str, Any] = {}

    def derived(self, name: str, compute: Callable[[Stack], T]) -> T:
        """What `compute` derives from the whole stack (its node pools), computed once per view: every stack
        policy of a run shares the view and only reads it."""
        if name not in self._derived:
            self._derived[name] = compute(self)
        value: T = self._derived[name]
        return value

    def __iter__(self) -> Iterator[Resource]:
        return iter(self.resources)

    def of_type(self, *types: str | Iterable[str]) -> list[Resource]:
        """The resources of these types, in stack order."""
        wanted: set[str] = set()
        for t in types:
            wanted.update([t] if isinstance(t, str) else t)
        positions = sorted(i for t in wanted for i in self._by_type.get(t, ()))
        return [self.resources[i] for i in positions]

    def referenced(self, source: Resource, prop: str, values: Iterable[str], types: Iterable[str]) -> list[Resource]:
        """The resources of `types` that `source.props[prop]` points at (by `values`, the ids it holds)."""
        wanted = set(types)
        if prop in source.property_dependencies:
            found = [self.by_urn[u] for u in source.property_dependencies[prop] if u in self.by_urn]
            return [r for r in found if r.type in wanted]
        values = [v for v in values if v]
        matched = [r for r in self.of_type(wanted) if values and any(v in identities(r) for v in values)]
        if matched:
            return matched
        return [self.by_urn[u] for u in source.dependencies if u in self.by_urn and self.by_urn[u].type in wanted]


def identities(r: Resource) -> set[str]:
    """The strings other resources use to point at `r`: its id, ARN and name (whichever are known)."""
    out = set()
    for key in ("id", "arn", "name", "bucket"):
        try:
            value = r.props.get(key)
        except UnknownValueError:
            continue
        if isinstance(value, str) and value:
            out.add(value)
    return out
