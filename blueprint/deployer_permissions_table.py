"""Regenerate components/catalog/deployer_permissions.yaml: the IAM actions the deployer needs per resource type,
from the CloudFormation resource schemas' handler permissions, as vendored by pulumi/pulumi-aws-native:

    git clone --depth 1 https://github.com/pulumi/pulumi-aws-native /tmp/aws-native
    python -m blueprint.deployer_permissions_table /tmp/aws-native/aws-cloudformation-schema \
        "$(git -C /tmp/aws-native rev-parse HEAD)"

How types map and wildcards expand: docs/design-notes.md#regenerating-the-deployer-permissions-table.
"""

from __future__ import annotations

import fnmatch
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from components.catalog.deployer_permissions import DEPLOYER_PERMISSIONS_PATH

#: Pulumi type -> the CloudFormation type whose handlers manage the same AWS resource.
CLOUDFORMATION_TYPES = {
    "aws:autoscaling/group:Group": "AWS::AutoScaling::AutoScalingGroup",
    "aws:autoscaling/lifecycleHook:LifecycleHook": "AWS::AutoScaling::LifecycleHook",
    "aws:autoscaling/schedule:Schedule": "AWS::AutoScaling::ScheduledAction",
    "aws:cloudwatch/dashboard:Dashboard": "AWS::CloudWatch::Dashboard",
    "aws:cloudwatch/eventRule:EventRule": "AWS::Events::Rule",
    # EventBridge targets are part of the rule in CloudFormation (events:PutTargets / RemoveTargets).
    "aws:cloudwatch/eventTarget:EventTarget": "AWS::Events::Rule",
    "aws:cloudwatch/logGroup:LogGroup": "AWS::Logs::LogGroup",
    "aws:cloudwatch/metricAlarm:MetricAlarm": "AWS::CloudWatch::Alarm",
    # The default security group is adopted and its rules revoked: the security group handler's actions.
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": "AWS::EC2::SecurityGroup",
    "aws:ec2/eip:Eip": "AWS::EC2::EIP",
    "aws:ec2/flowLog:FlowLog": "AWS::EC2::FlowLog",
    "aws:ec2/internetGateway:InternetGateway": "AWS::EC2::InternetGateway",
    "aws:ec2/launchTemplate:LaunchTemplate": "AWS::EC2::LaunchTemplate",
    "aws:ec2/natGateway:NatGateway": "AWS::EC2::NatGateway",
    "aws:ec2/placementGroup:PlacementGroup": "AWS::EC2::PlacementGroup",
    "aws:ec2/route:Route": "AWS::EC2::Route",
    "aws:ec2/routeTable:RouteTable": "AWS::EC2::RouteTable",
    "aws:ec2/routeTableAssociation:RouteTableAssociation": "AWS::EC2::SubnetRouteTableAssociation",
    "aws:ec2/securityGroup:SecurityGroup": "AWS::EC2::SecurityGroup",
    "aws:ec2/subnet:Subnet": "AWS::EC2::Subnet",
    "aws:ec2/vpc:Vpc": "AWS::EC2::VPC",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "AWS::EC2::VPCEndpoint",
    "aws:ec2/vpnGatewayAttachment:VpnGatewayAttachment": "AWS::EC2::VPCGatewayAttachment",
    "aws:ec2transitgateway/vpcAttachment:VpcAttachment": "AWS::EC2::TransitGatewayVpcAttachment",
    "aws:efs/fileSystem:FileSystem": "AWS::EFS::FileSystem",
    "aws:efs/mountTarget:MountTarget": "AWS::EFS::MountTarget",
    "aws:eks/accessEntry:AccessEntry": "AWS::EKS::AccessEntry",
    # Access policies are associated with an access entry in CloudFormation (eks:AssociateAccessPolicy).
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": "AWS::EKS::AccessEntry",
    "aws:eks/addon:Addon": "AWS::EKS::Addon",
    "aws:eks/cluster:Cluster": "AWS::EKS::Cluster",
    "aws:eks/nodeGroup:NodeGroup": "AWS::EKS::Nodegroup",
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": "AWS::EKS::PodIdentityAssociation",
    "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation": "AWS::FSx::DataRepositoryAssociation",
    "aws:iam/instanceProfile:InstanceProfile": "AWS::IAM::InstanceProfile",
    "aws:iam/role:Role": "AWS::IAM::Role",
    "aws:iam/rolePolicy:RolePolicy": "AWS::IAM::RolePolicy",
    "aws:iam/serviceLinkedRole:ServiceLinkedRole": "AWS::IAM::ServiceLinkedRole",
    "aws:kms/alias:Alias": "AWS::KMS::Alias",
    "aws:kms/key:Key": "AWS::KMS::Key",
    "aws:rolesanywhere/profile:Profile": "AWS::RolesAnywhere::Profile",
    "aws:rolesanywhere/trustAnchor:TrustAnchor": "AWS::RolesAnywhere::TrustAnchor",
    "aws:s3/bucket:Bucket": "AWS::S3::Bucket",
    # A bucket's configuration resources map to the bucket handler, which sets each of them.
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": "AWS::S3::Bucket",
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": "AWS::S3::Bucket",
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": "AWS::S3::Bucket",
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": "AWS::S3::Bucket",
    "aws:s3/bucketVersioning:BucketVersioning": "AWS::S3::Bucket",
    "aws:s3/bucketPolicy:BucketPolicy": "AWS::S3::BucketPolicy",
    "aws:sns/topic:Topic": "AWS::SNS::Topic",
    "aws:sns/topicSubscription:TopicSubscription": "AWS::SNS::Subscription",
    "aws:sqs/queue:Queue": "AWS::SQS::Queue",
    "aws:sqs/queuePolicy:QueuePolicy": "AWS::SQS::QueuePolicy",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": "AWS::EC2::SecurityGroupEgress",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": "AWS::EC2::SecurityGroupIngress",
}

#: Pulumi types with no CloudFormation schema that lists their handlers' permissions, by hand, with their source.
MANUAL: dict[str, dict[str, Any]] = {
    "aws:fsx/lustreFileSystem:LustreFileSystem": {
        "actions": [
            "fsx:CreateFileSystem",
            "fsx:DescribeFileSystems",
            "fsx:UpdateFileSystem",
            "fsx:DeleteFileSystem",
            "fsx:TagResource",
            "fsx:UntagResource",
            "fsx:ListTagsForResource",
            "ec2:DescribeSubnets",
            "ec2:DescribeSecurityGroups",
            "ec2:DescribeVpcs",
            "kms:CreateGrant",
            "kms:DescribeKey",
            "iam:CreateServiceLinkedRole",
        ],
        "source": "FSXIAM",
        "note": "AWS::FSx::FileSystem's schema lists no handler permissions; the actions are those of the FSx API "
        "calls the resource makes (create, describe, update, delete, tags) and what FSx checks on the caller (the "
        "subnets and security groups named, the KMS key's grant, FSx's service-linked role)",
    },
    "aws:efs/fileSystemPolicy:FileSystemPolicy": {
        "actions": [
            "elasticfilesystem:PutFileSystemPolicy",
            "elasticfilesystem:DescribeFileSystemPolicy",
            "elasticfilesystem:DeleteFileSystemPolicy",
        ],
        "source": "SAREFS",
        "note": "the file system policy is a property of AWS::EFS::FileSystem in CloudFormation; these are the three "
        "calls",
    },
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": {
        "actions": ["iam:AttachRolePolicy", "iam:DetachRolePolicy", "iam:ListAttachedRolePolicies"],
        "source": "SARIAM",
        "note": "attached policies are part of AWS::IAM::Role in CloudFormation; these are the three calls",
    },
    "aws:kms/grant:Grant": {
        "actions": ["kms:CreateGrant", "kms:ListGrants", "kms:RetireGrant", "kms:RevokeGrant"],
        "source": "SARKMS",
        "note": "no CloudFormation resource type; CreateGrant to create, ListGrants to read, Retire/Revoke to delete",
    },
    "aws:ssm/activation:Activation": {
        "actions": [
            "ssm:CreateActivation",
            "ssm:DescribeActivations",
            "ssm:DeleteActivation",
            "ssm:AddTagsToResource",
            "ssm:RemoveTagsFromResource",
            "ssm:ListTagsForResource",
            "iam:PassRole",
        ],
        "source": "SARSSM",
        "note": "no CloudFormation resource type; the activation passes the hybrid nodes role to Systems Manager",
    },
    # A tag on a group the stack does not create (a managed node group's, which EKS creates).
    "aws:autoscaling/tag:Tag": {
        "actions": ["autoscaling:CreateOrUpdateTags", "autoscaling:DeleteTags", "autoscaling:DescribeTags"],
        "source": "SARASG",
        "note": "tags are part of AWS::AutoScaling::AutoScalingGroup in CloudFormation; these are the three calls",
    },
}

#: Provider invokes the program makes (`blueprint.plan.mocks.PlanMocks.call` answers them offline) -> actions.
INVOKES: dict[str, dict[str, Any]] = {
    "aws:index/getAvailabilityZones:getAvailabilityZones": {
        "actions": ["ec2:DescribeAvailabilityZones"],
        "source": "SAREC2",
    },
    "aws:index/getRegion:getRegion": {"actions": ["ec2:DescribeRegions"], "source": "SAREC2"},
    "aws:index/getCallerIdentity:getCallerIdentity": {
        "actions": [],
        "source": "STSGCI",
        "note": "sts:GetCallerIdentity needs no permission",
    },
    "aws:index/getPartition:getPartition": {"actions": [], "source": "SAREC2", "note": "answered from the provider"},
    "aws:iam/getPolicyDocument:getPolicyDocument": {
        "actions": [],
        "source": "SARIAM",
        "note": "rendered by the provider, no AWS call",
    },
    "aws:iam/getSessionContext:getSessionContext": {
        "actions": ["iam:GetRole"],
        "source": "SARIAM",
        "note": "reads the deployer's role to turn an assumed-role session into the role",
    },
    "aws:ssm/getParameter:getParameter": {
        "actions": ["ssm:GetParameter"],
        "source": "SARSSM",
        "note": "the public EKS-optimized AMI parameters under /aws/service/",
    },
}

SOURCES = {
    "CFN": {
        "title": "AWS CloudFormation resource type schemas, handlers.{create,read,update,delete}.permissions (the IAM "
        "permissions each handler needs), as vendored by pulumi/pulumi-aws-native aws-cloudformation-schema/",
        "url": "https://github.com/pulumi/pulumi-aws-native/tree/{commit}/aws-cloudformation-schema",
        "snapshot": "commit {short}",
    },
    "FSXIAM": {
        "title": "Amazon FSx API Reference, CreateFileSystem, and FSx for Lustre User Guide, identity and access "
        "management (fsx:CreateFileSystem with the subnets, security groups and KMS key it names)",
        "url": "https://docs.aws.amazon.com/fsx/latest/APIReference/API_CreateFileSystem.html",
        "snapshot": "2025-2026",
    },
    "SARIAM": {
        "title": "Service Authorization Reference: actions, resources and condition keys for AWS Identity and Access "
        "Management",
        "url": "https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsidentityandaccessmanagementiam.html",
        "snapshot": "2025-2026",
    },
    "SARASG": {
        "title": "Service Authorization Reference: actions, resources and condition keys for Amazon EC2 Auto Scaling",
        "url": "https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2autoscaling.html",
        "snapshot": "2025-2026",
    },
    "SARKMS": {
        "title": "Service Authorization Reference: actions, resources and condition keys for AWS Key Management "
        "Service",
        "url": "https://docs.aws.amazon.com/service-authorization/latest/reference/list_awskeymanagementservice.html",
        "snapshot": "2025-2026",
    },
    "SAREFS": {
        "title": "Service Authorization Reference: actions, resources and condition keys for Amazon Elastic File "
        "System",
        "url": "https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelasticfilesystem.html",
        "snapshot": "2025-2026",
    },
    "SARSSM": {
        "title": "Service Authorization Reference: actions, resources and condition keys for AWS Systems Manager",
        "url": "https://docs.aws.amazon.com/service-authorization/latest/reference/list_awssystemsmanager.html",
        "snapshot": "2025-2026",
    },
    "SAREC2": {
        "title": "Service Authorization Reference: actions, resources and condition keys for Amazon EC2",
        "url": "https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html",
        "snapshot": "2025-2026",
    },
    "STSGCI": {
        "title": "AWS STS API Reference, GetCallerIdentity: no permissions are required to perform this operation",
        "url": "https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html",
        "snapshot": "2025-2026",
    },
}

HEADER = """\
# The IAM actions the deployer (the principal running `pulumi up`) needs per resource type the program can register
# and per provider invoke it makes. Generated by `python -m blueprint.deployer_permissions_table <schemas> <commit>`
# (see that module); regenerate rather than edit. `blueprint deployer-policy` builds a stack's policy from the types
# in its offline plan (docs/operations.md, "The deployer's IAM policy").
"""


def _schema_file(cloudformation_type: str) -> str:
    return "aws-" + "-".join(cloudformation_type.lower().split("::")[1:]) + ".json"


def handler_actions(schema: dict[str, Any]) -> list[str]:
    """Every permission of the create, read, update and delete handlers (`list` reads resources the stack does not
    name)."""
    handlers = schema.get("handlers", {})
    listed = {a for h in ("create", "read", "update", "delete") for a in handlers.get(h, {}).get("permissions", [])}
    # IAM reads the service prefix case-insensitively; a schema may spell it `S3:`, the policy spells it `s3:`.
    return sorted({f"{service.lower()}:{name}" for service, _, name in (a.partition(":") for a in listed)})


#: An IAM action as policies spell it: `service:ActionName` (a schema may list something else, such as an S3 server
#: access log operation `s3:REST.PUT.OBJECT`, which IAM does not know).
ACTION = re.compile(r"[a-z0-9-]+:[A-Za-z0-9*]+")


def expand(actions: list[str], known: set[str]) -> tuple[list[str], list[str]]:
    """(actions with each wildcard replaced by the `known` actions it matches, the wildcards that matched none and
    the entries that are no IAM action)."""
    out: set[str] = set()
    dropped = []
    for action in actions:
        if not ACTION.fullmatch(action):
            dropped.append(action)
        elif "*" not in action:
            out.add(action)
            continue
        matches = {k for k in known if fnmatch.fnmatchcase(k, action)}
        if matches:
            out |= matches
        else:
            dropped.append(action)
    return sorted(out), dropped


def generate(schema_dir: Path, commit: str) -> dict[str, Any]:
    schemas = {
        cfn: json.loads((schema_dir / _schema_file(cfn)).read_text()) for cfn in set(CLOUDFORMATION_TYPES.values())
    }
    listed = {cfn: handler_actions(schema) for cfn, schema in schemas.items()}
    known = {a for actions in listed.values() for a in actions if "*" not in a and ACTION.fullmatch(a)}
    known |= {a for entry in MANUAL.values() for a in entry["actions"]}
    types: dict[str, Any] = {}
    for pulumi_type, cfn in sorted(CLOUDFORMATION_TYPES.items()):
        actions, dropped = expand(listed[cfn], known)
        if not actions:
            raise SystemExit(f"{cfn} lists no handler permissions: give {pulumi_type} a MANUAL entry")
        entry: dict[str, Any] = {"cloudformation": cfn, "actions": actions, "source": "CFN"}
        if dropped:
            entry["dropped"] = dropped
        types[pulumi_type] = entry
    for pulumi_type, entry in sorted(MANUAL.items()):
        types[pulumi_type] = {**entry, "actions": sorted(entry["actions"])}
    sources = {
        tag: {k: v.replace("{commit}", commit).replace("{short}", commit[:8]) for k, v in entry.items()}
        for tag, entry in SOURCES.items()
    }
    return {"sources": sources, "resourceTypes": types, "invokes": INVOKES}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = generate(Path(argv[0]), argv[1])
    DEPLOYER_PERMISSIONS_PATH.write_text(HEADER + yaml.safe_dump(data, sort_keys=False, width=120))
    print(f"wrote {DEPLOYER_PERMISSIONS_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
