"""Pulumi mocks that let the real program run offline: for `blueprint plan` and for the tests alike.

Following pulumi-testing-notes §1.4, `PlanMocks` answers resource registrations and provider invokes with plausible
values; the monitor that hands them the registrations, and records each one with its resource options, is
`blueprint.plan.monitor`.

Invokes the program makes are answered explicitly; an invoke nobody taught these mocks raises instead of returning
an empty result full of `None`s (a silent-pass pitfall, notes §1.5).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockCallArgs, MockResourceArgs

from components.catalog.zones import eks_refused_zone_ids, region_zones
from components.planning.key_policy import SERVICE_LINKED_ROLE_PREFIXES

ACCOUNT_ID = "123456789012"
FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBofflineplan\n-----END CERTIFICATE-----\n").decode()


def _digest(typ: str, name: str) -> bytes:
    """The seed of every mock identifier: the same type and name give the same id and ARN in every run."""
    return hashlib.sha1(f"{typ}/{name}".encode()).digest()


def _uuid(typ: str, name: str) -> str:
    """A version-4-shaped UUID, as AWS uses for KMS key ids, SSM activation ids and Auto Scaling group ARNs."""
    return str(uuid.UUID(bytes=_digest(typ, name)[:16], version=4))


def _hex17(typ: str, name: str) -> str:
    """The 17 hex digits after an EC2 (and FSx, EFS) id prefix: `sg-0123456789abcdef0`."""
    return _digest(typ, name).hex()[:17]


#: The SSM parameters of one EKS-optimized AMI release (components.planning.nodeadm.ami_ssm_parameter): AL2023's
#: `.../amazon-eks-node-al2023-<arch>-<variant>-<k8s>-v<date>/image_id` and Bottlerocket's `.../<version>/image_id`.
PINNED_AMI_PARAMETER = re.compile(
    r"^/aws/service/eks/optimized-ami/(?P<k8s>1\.\d+)/amazon-linux-2023/(?P<arch>x86_64|arm64)/"
    r"(?P<variant>standard|nvidia|neuron)/amazon-eks-node-al2023-(?P=arch)-(?P=variant)-(?P=k8s)-v\d{8}/image_id$"
    r"|^/aws/service/bottlerocket/aws-k8s-1\.\d+(-nvidia)?/(x86_64|arm64)/\d+\.\d+\.\d+/image_id$"
)

#: EC2-style prefixed ids (`<prefix>-<17 hex>`) and the ARN resource segment each one appears under.
_PREFIXED: dict[str, tuple[str, str]] = {
    "aws:ec2/vpc:Vpc": ("vpc", "ec2:vpc"),
    "aws:ec2/subnet:Subnet": ("subnet", "ec2:subnet"),
    "aws:ec2/securityGroup:SecurityGroup": ("sg", "ec2:security-group"),
    "aws:ec2/launchTemplate:LaunchTemplate": ("lt", "ec2:launch-template"),
    "aws:ec2/natGateway:NatGateway": ("nat", "ec2:natgateway"),
    "aws:ec2/internetGateway:InternetGateway": ("igw", "ec2:internet-gateway"),
    "aws:ec2/routeTable:RouteTable": ("rtb", "ec2:route-table"),
    "aws:ec2/eip:Eip": ("eipalloc", "ec2:elastic-ip"),
    "aws:ec2/vpcEndpoint:VpcEndpoint": ("vpce", "ec2:vpc-endpoint"),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": ("sgr", "ec2:security-group-rule"),
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": ("sgr", "ec2:security-group-rule"),
    "aws:fsx/lustreFileSystem:LustreFileSystem": ("fs", "fsx:file-system"),
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": ("dra", "fsx:association"),
    "aws:efs/fileSystem:FileSystem": ("fs", "elasticfilesystem:file-system"),
    "aws:efs/mountTarget:MountTarget": ("fsmt", "elasticfilesystem:mount-target"),
    "aws:efs/accessPoint:AccessPoint": ("fsap", "elasticfilesystem:access-point"),
}


class PlanMocks(pulumi.runtime.Mocks):
    """The computed outputs the program reads (ids, ARNs, endpoints); every other output is its input.

    Ids and ARNs have the shapes AWS documents for each type (a KMS key's UUID and `key/<uuid>` ARN, an IAM role's
    `arn:aws:iam::<account>:role/<name>`, `sg-<17 hex>`, an SQS queue's URL as its id, ...), derived from a hash of
    the type and name so every run gives the same values. Types not modelled get `<name>-id` and a generic ARN.
    """

    def __init__(self, region: str, zone_ids: Mapping[str, str] | None = None) -> None:
        self.region = region
        known = region_zones(region)
        #: The Region's AZ names and IDs as the catalog lists them (components/catalog/zones.yaml), paired in order:
        #: one account's possible mapping. Where each account maps names its own way, the IDs EKS refuses pair with
        #: the last names, so the plan does not drop a cluster subnet for a zone a real account may well not have
        #: there. A Region the catalog does not list gets `<region>a` to `<region>f`. The pairs the config states
        #: (`zone_ids`, its `network.availabilityZoneIds`) win: the plan's account is the one the config describes.
        self.azs = list(known.names) if known else [f"{region}{suffix}" for suffix in "abcdef"]
        ids = list(known.ids) if known else [f"{region}-az{i + 1}" for i in range(len(self.azs))]
        if known and known.mapping == "independent":
            ids.sort(key=lambda zone_id: zone_id in eks_refused_zone_ids())  # stable: the rest keep their order
        stated = dict(zone_ids or {})
        self.azs += [name for name in stated if name not in self.azs]
        rest = iter(zone_id for zone_id in ids if zone_id not in stated.values())
        self.az_ids = [stated[name] if name in stated else next(rest, f"{region}-az0") for name in self.azs]
        #: Every provider invoke the program made, by token: what the deployer's policy must also allow
        #: (`blueprint.deployer_policy`).
        self.invoked: set[str] = set()

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        """The id and the outputs the provider would compute. Inputs are not echoed: outside a preview the SDK
        takes every property the engine returns no value for from the resource's own inputs, so echoing them
        only encoded and decoded each registration's inputs once more."""
        if not args.custom:
            return None, {}
        inputs = args.inputs
        name = inputs.get("name", args.name)
        resource_id, identity = self._identity(args, name)
        state: dict[str, Any] = {}
        if "arn" not in inputs:
            state["arn"] = self._generic_arn(args.typ, name)
        if "name" not in inputs:
            state["name"] = args.name
        state.update(identity)
        state.update(self._computed_outputs(args, resource_id))
        return resource_id, state

    def _generic_arn(self, typ: str, name: str) -> str:
        """`arn:aws:<service>:<region>:<account>:<type>/<name>`, for the types `_identity` does not model."""
        service = typ.split(":")[1].split("/")[0]
        return self._arn(service, f"{typ.split(':')[-1].lower()}/{name}")

    def _arn(self, service: str, resource: str, region: bool = True, account: bool = True) -> str:
        return f"arn:aws:{service}:{self.region if region else ''}:{ACCOUNT_ID if account else ''}:{resource}"

    def _identity(self, args: MockResourceArgs, name: str) -> tuple[str, dict[str, Any]]:
        """(id, outputs naming the resource: `arn` and the type's own id attributes) as AWS shapes them."""
        typ, inputs = args.typ, args.inputs
        if typ in _PREFIXED:
            prefix, where = _PREFIXED[typ]
            service, kind = where.split(":")
            resource_id = f"{prefix}-{_hex17(typ, args.name)}"
            return resource_id, {"arn": self._arn(service, f"{kind}/{resource_id}")}
        if typ == "aws:kms/key:Key":
            key_id = _uuid(typ, args.name)
            return key_id, {"keyId": key_id, "arn": self._arn("kms", f"key/{key_id}")}
        if typ == "aws:kms/alias:Alias":
            target = inputs.get("targetKeyId")
            target_arn = (
                target
                if not isinstance(target, str) or target.startswith("arn:")
                else (self._arn("kms", f"key/{target}"))
            )
            return name, {"arn": self._arn("kms", name), "targetKeyArn": target_arn}
        if typ == "aws:iam/role:Role":
            path = inputs.get("path") or "/"
            unique = "AROA" + _digest(typ, args.name).hex()[:17].upper()
            return name, {"arn": self._arn("iam", f"role{path}{name}", region=False), "uniqueId": unique}
        if typ == "aws:iam/serviceLinkedRole:ServiceLinkedRole":
            # IAM names it `<the service's prefix>_<suffix>` under /aws-service-role/<service>/; the id is its ARN.
            service = inputs["awsServiceName"]
            prefix = SERVICE_LINKED_ROLE_PREFIXES[service]
            role = f"{prefix}_{inputs['customSuffix']}" if inputs.get("customSuffix") else prefix
            path = f"/aws-service-role/{service}/"
            arn = self._arn("iam", f"role{path}{role}", region=False)
            return arn, {
                "arn": arn,
                "name": role,
                "path": path,
                "uniqueId": "AROA" + _digest(typ, args.name).hex()[:17].upper(),
            }
        if typ == "aws:iam/instanceProfile:InstanceProfile":
            return name, {"arn": self._arn("iam", f"instance-profile/{name}", region=False)}
        if typ == "aws:iam/policy:Policy":
            arn = self._arn("iam", f"policy/{name}", region=False)
            return arn, {"arn": arn}
        if typ == "aws:s3/bucket:Bucket":
            # A bucket named by prefix gets a unique suffix from the provider; S3 ARNs have no region or account.
            suffix = hashlib.sha1(args.name.encode()).hexdigest()[:8]
            bucket = inputs.get("bucket") or f"{inputs.get('bucketPrefix', name)}{suffix}"
            return bucket, {"bucket": bucket, "arn": self._arn("s3", bucket, region=False, account=False)}
        if typ == "aws:eks/cluster:Cluster":
            return name, {"arn": self._arn("eks", f"cluster/{name}")}
        if typ == "aws:autoscaling/group:Group":
            group = f"autoScalingGroup:{_uuid(typ, args.name)}:autoScalingGroupName/{name}"
            return name, {"arn": self._arn("autoscaling", group)}
        if typ == "aws:sqs/queue:Queue":
            url = f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT_ID}/{name}"
            return url, {"url": url, "arn": self._arn("sqs", name)}
        if typ == "aws:sns/topic:Topic":
            arn = self._arn("sns", name)
            return arn, {"arn": arn}
        if typ == "aws:cloudwatch/logGroup:LogGroup":
            return name, {"arn": self._arn("logs", f"log-group:{name}")}
        if typ == "aws:cloudwatch/eventRule:EventRule":
            return name, {"arn": self._arn("events", f"rule/{name}")}
        if typ == "aws:cloudwatch/metricAlarm:MetricAlarm":
            return name, {"arn": self._arn("cloudwatch", f"alarm:{name}")}
        if typ == "aws:ec2/placementGroup:PlacementGroup":
            return name, {
                "arn": self._arn("ec2", f"placement-group/{name}"),
                "placementGroupId": (f"pg-{_hex17(typ, args.name)}"),
            }
        if typ == "aws:ssm/activation:Activation":
            return _uuid(typ, args.name), {}
        if typ == "aws:eks/podIdentityAssociation:PodIdentityAssociation":
            association = f"a-{_hex17(typ, args.name)}"
            cluster = inputs.get("clusterName", "")
            return association, {
                "associationId": association,
                "associationArn": self._arn("eks", f"podidentityassociation/{cluster}/{association}"),
            }
        return f"{args.name}-id", {}

    def _computed_outputs(self, args: MockResourceArgs, resource_id: str) -> dict[str, Any]:
        name = args.inputs.get("name", args.name)
        if args.typ == "aws:eks/cluster:Cluster":
            oidc_id = _digest("eks-oidc-issuer", name).hex()[:32].upper()
            return {
                "endpoint": f"https://{hashlib.sha1(name.encode()).hexdigest()[:32].upper()}"
                f".gr7.{self.region}.eks.amazonaws.com",
                "certificateAuthority": {"data": FAKE_CA},
                "vpcConfig": {
                    **args.inputs.get("vpcConfig", {}),
                    "clusterSecurityGroupId": f"sg-{_hex17('eks-cluster-security-group', name)}",
                },
                "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.{self.region}.amazonaws.com/id/{oidc_id}"}]}],
                "status": "ACTIVE",
            }
        if args.typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            return {
                "dnsName": f"{resource_id}.fsx.{self.region}.amazonaws.com",
                "mountName": "abcdefgh",
            }
        if args.typ == "aws:efs/fileSystem:FileSystem":
            return {"dnsName": f"{resource_id}.efs.{self.region}.amazonaws.com"}
        if args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            return {"latestVersion": 1}
        if args.typ == "aws:ssm/activation:Activation":
            return {"activationCode": "offline-activation-code"}
        if args.typ == "aws:eks/nodeGroup:NodeGroup":
            # EKS names a managed node group's Auto Scaling group `eks-<node group>-<uuid>`.
            group = f"eks-{name}-{_uuid(args.typ, name)}"
            return {"resources": [{"autoscalingGroups": [{"name": group}]}], "status": "ACTIVE"}
        return {}

    def call(self, args: MockCallArgs) -> Any:
        token, a = args.token, args.args
        self.invoked.add(token)
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {
                "names": self.azs[: len(self.az_ids)],
                "zoneIds": self.az_ids[: len(self.azs)],
                "id": self.region,
            }
        if token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region, "id": self.region, "description": self.region}
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                "accountId": ACCOUNT_ID,
                "arn": f"arn:aws:iam::{ACCOUNT_ID}:user/offline",
                "userId": "AIDAOFFLINE",
                "id": ACCOUNT_ID,
            }
        if token == "aws:iam/getSessionContext:getSessionContext":
            return _session_context(a["arn"])
        if token == "aws:index/getPartition:getPartition":
            return {
                "partition": "aws",
                "dnsSuffix": "amazonaws.com",
                "id": "aws",
                "reverseDnsPrefix": "com.amazonaws",
            }
        if token == "aws:ssm/getParameter:getParameter":
            if not PINNED_AMI_PARAMETER.match(a["name"]):
                raise ValueError(
                    f"the offline mocks answer the SSM parameter of a pinned EKS-optimized AMI release only, not "
                    f"{a['name']}: a `recommended` or `latest` image would move under the stack on every `pulumi up`"
                )
            ami = "ami-" + hashlib.sha1(a["name"].encode()).hexdigest()[:17]
            return {
                "name": a["name"],
                "value": ami,
                "insecureValue": ami,
                "type": "String",
                "id": a["name"],
                "arn": f"arn:aws:ssm:{self.region}::parameter{a['name']}",
                "version": 1,
                "withDecryption": True,
            }
        if token == "aws:iam/getPolicyDocument:getPolicyDocument":
            return {"json": json.dumps(_policy_document(a)), "id": "policy"}
        raise NotImplementedError(f"the offline mocks do not answer the invoke {token}; teach PlanMocks.call")


def _session_context(arn: str) -> dict[str, Any]:
    """`aws.iam.get_session_context` as AWS answers it: an assumed-role session's role (offline: without a path), any
    other ARN passed through."""
    head, _, resource = arn.partition(":assumed-role/")
    if not resource:
        return {"arn": arn, "issuerArn": arn, "id": arn}
    role, _, session = resource.partition("/")
    issuer = head.replace(":sts::", ":iam::") + f":role/{role}"
    return {"arn": arn, "issuerArn": issuer, "issuerName": role, "sessionName": session, "id": arn}


def _policy_document(args: dict[str, Any]) -> dict[str, Any]:
    """Render `aws.iam.get_policy_document` statements the way AWS does, so plans and policies can read them."""
    statements = []
    for s in args.get("statements", []) or []:
        rendered: dict[str, Any] = {"Effect": s.get("effect", "Allow")}
        if s.get("sid"):
            rendered["Sid"] = s["sid"]
        if s.get("actions"):
            rendered["Action"] = s["actions"]
        if s.get("resources"):
            rendered["Resource"] = s["resources"]
        if s.get("principals"):
            rendered["Principal"] = {p["type"]: p["identifiers"] for p in s["principals"]}
        if s.get("conditions"):
            cond: dict[str, dict[str, Any]] = {}
            for c in s["conditions"]:
                cond.setdefault(c["test"], {})[c["variable"]] = c["values"]
            rendered["Condition"] = cond
        statements.append(rendered)
    return {"Version": "2012-10-17", "Statement": statements}
