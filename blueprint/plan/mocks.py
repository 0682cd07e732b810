"""Pulumi mocks that let the real program run offline: for `blueprint plan` and for the tests alike.

Two pieces, following pulumi-testing-notes §1.4: `PlanMocks` answers resource registrations and provider invokes
with plausible values, and `RecordingMonitor` captures every registration together with its resource options
(protect, retainOnDelete, parent, dependsOn, ignoreChanges), which `Mocks.new_resource` never sees.

Invokes the program makes are answered explicitly; an invoke nobody taught these mocks raises instead of returning
an empty result full of `None`s (a silent-pass pitfall, notes §1.5).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockCallArgs, MockMonitor, MockResourceArgs

ACCOUNT_ID = "123456789012"
FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIBofflineplan\n-----END CERTIFICATE-----\n").decode()


def _fake_id(typ: str, name: str) -> str:
    """Stable, realistic-looking ids: `<prefix>-<hash>` where AWS uses prefixed ids."""
    digest = hashlib.sha1(f"{typ}/{name}".encode()).hexdigest()[:17]
    prefixes = {
        "aws:ec2/vpc:Vpc": "vpc",
        "aws:ec2/subnet:Subnet": "subnet",
        "aws:ec2/securityGroup:SecurityGroup": "sg",
        "aws:ec2/launchTemplate:LaunchTemplate": "lt",
        "aws:ec2/natGateway:NatGateway": "nat",
        "aws:ec2/internetGateway:InternetGateway": "igw",
        "aws:ec2/routeTable:RouteTable": "rtb",
        "aws:ec2/eip:Eip": "eipalloc",
        "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce",
        "aws:fsx/lustreFileSystem:LustreFileSystem": "fs",
        "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "dra",
        "aws:efs/fileSystem:FileSystem": "fs",
        "aws:efs/mountTarget:MountTarget": "fsmt",
        "aws:efs/accessPoint:AccessPoint": "fsap",
        "aws:kms/key:Key": "mrk",
    }
    prefix = prefixes.get(typ)
    return f"{prefix}-{digest}" if prefix else f"{name}-id"


def _arn(typ: str, name: str, region: str) -> str:
    service = typ.split(":")[1].split("/")[0]
    return f"arn:aws:{service}:{region}:{ACCOUNT_ID}:{typ.split(':')[-1].lower()}/{name}"


class PlanMocks(pulumi.runtime.Mocks):
    """Echo inputs as outputs, and add the computed outputs the program reads (ids, ARNs, endpoints)."""

    def __init__(self, region: str) -> None:
        self.region = region
        self.azs = [f"{region}{suffix}" for suffix in "abcdef"]

    def new_resource(self, args: MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        state: dict[str, Any] = dict(args.inputs)
        if not args.custom:
            return None, state
        resource_id = _fake_id(args.typ, args.name)
        state.setdefault("arn", _arn(args.typ, state.get("name", args.name), self.region))
        state.setdefault("name", args.name)
        extra = self._computed_outputs(args, resource_id)
        state.update(extra)
        return resource_id, state

    def _computed_outputs(self, args: MockResourceArgs, resource_id: str) -> dict[str, Any]:
        name = args.inputs.get("name", args.name)
        if args.typ == "aws:eks/cluster:Cluster":
            return {
                "endpoint": f"https://{hashlib.sha1(name.encode()).hexdigest()[:32].upper()}"
                f".gr7.{self.region}.eks.amazonaws.com",
                "certificateAuthority": {"data": FAKE_CA},
                "vpcConfig": {
                    **args.inputs.get("vpcConfig", {}),
                    "clusterSecurityGroupId": "sg-0c1u5t3r5g00000",
                },
                "identities": [{"oidcs": [{"issuer": f"https://oidc.eks.{self.region}.amazonaws.com/id/OFFLINE"}]}],
                "status": "ACTIVE",
            }
        if args.typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            return {
                "dnsName": f"{resource_id}.fsx.{self.region}.amazonaws.com",
                "mountName": "abcdefgh",
            }
        if args.typ == "aws:s3/bucket:Bucket":
            # A bucket named by prefix gets a unique suffix from the provider; S3 ARNs have no region or account.
            suffix = hashlib.sha1(args.name.encode()).hexdigest()[:8]
            bucket = args.inputs.get("bucket") or f"{args.inputs.get('bucketPrefix', name)}{suffix}"
            return {"bucket": bucket, "arn": f"arn:aws:s3:::{bucket}"}
        if args.typ == "aws:efs/fileSystem:FileSystem":
            return {"dnsName": f"{resource_id}.efs.{self.region}.amazonaws.com"}
        if args.typ == "aws:sqs/queue:Queue":
            return {"url": f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT_ID}/{name}"}
        if args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            return {"latestVersion": 1}
        if args.typ == "aws:iam/instanceProfile:InstanceProfile":
            return {"arn": f"arn:aws:iam::{ACCOUNT_ID}:instance-profile/{name}"}
        if args.typ == "aws:iam/role:Role":
            return {"arn": f"arn:aws:iam::{ACCOUNT_ID}:role/{name}"}
        if args.typ == "aws:ssm/activation:Activation":
            return {"activationCode": "offline-activation-code"}
        return {}

    def call(self, args: MockCallArgs) -> Any:
        token, a = args.token, args.args
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {
                "names": self.azs,
                "zoneIds": [f"use1-az{i + 1}" for i in range(len(self.azs))],
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
        if token == "aws:index/getPartition:getPartition":
            return {
                "partition": "aws",
                "dnsSuffix": "amazonaws.com",
                "id": "aws",
                "reverseDnsPrefix": "com.amazonaws",
            }
        if token == "aws:ssm/getParameter:getParameter":
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
        if token == "aws:eks/getAddonVersion:getAddonVersion":
            return {
                "addonName": a["addonName"],
                "kubernetesVersion": a["kubernetesVersion"],
                "version": f"v1.0.0-eksbuild.1+default-for-{a['kubernetesVersion']}",
                "id": a["addonName"],
            }
        raise NotImplementedError(f"the offline mocks do not answer the invoke {token}; teach PlanMocks.call")


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


@dataclass
class Registration:
    """One resource registration as the offline plan reports it (design.md, plan contract)."""

    urn: str
    type: str
    name: str
    parent: str | None
    custom: bool
    inputs: dict[str, Any]
    protect: bool
    retain_on_delete: bool
    depends_on: list[str] = field(default_factory=list)
    ignore_changes: list[str] = field(default_factory=list)
    provider: str | None = None
    id: str | None = None
    #: Input property -> URNs it depends on: how policies link a launch template to its security group even
    #: where ids are unknown (as in a real preview).
    property_dependencies: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "id": self.id,
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "custom": self.custom,
            "inputs": self.inputs,
            "options": {
                "protect": self.protect,
                "retainOnDelete": self.retain_on_delete,
                "dependsOn": self.depends_on,
                "ignoreChanges": self.ignore_changes,
            },
            "propertyDependencies": self.property_dependencies,
        }


SECRET = "[secret]"


def _plain(value: Any) -> Any:
    """Make deserialized inputs JSON-friendly: secrets masked, resource references by URN, unknowns marked."""
    if isinstance(value, dict):
        if value.get(rpc._special_sig_key) == rpc._special_secret_sig:
            return SECRET
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, pulumi.Resource):
        return f"<resource {type(value).__name__}>"
    if value is rpc.UNKNOWN or value == rpc.UNKNOWN:
        return "<unknown>"
    return value


class RecordingMonitor(MockMonitor):
    """A mock monitor that keeps every registration with its options, in registration order."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.registrations: list[Registration] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.type == "pulumi:pulumi:Stack":
            return response
        inputs = rpc.deserialize_properties(request.object, keep_unknowns=True)
        self.registrations.append(
            Registration(
                urn=response.urn,
                type=request.type,
                name=request.name,
                parent=request.parent or None,
                custom=bool(request.custom),
                inputs=_plain(inputs),
                protect=bool(request.protect),
                retain_on_delete=bool(request.retainOnDelete),
                depends_on=list(request.dependencies),
                ignore_changes=list(request.ignoreChanges),
                provider=request.provider or None,
                id=response.id or None,
                property_dependencies={k: list(v.urns) for k, v in request.propertyDependencies.items()},
            )
        )
        return response
