"""The cluster's network: a new VPC laid out for EKS, or an existing VPC's subnets passed through.

New VPC, per availability zone: one private subnet (nodes and pods; the VPC CNI gives pods VPC addresses, so these
are the big ones) and one public subnet (NAT gateways and internet-facing load balancers only). Private subnets
reach the internet through a NAT gateway in their own AZ (`one-per-az`, survives the loss of an AZ) or through one
shared gateway (`single`, cheaper for dev stacks). An S3 gateway endpoint keeps S3 traffic (datasets, checkpoints,
Lustre data repositories, container layers) off the NAT gateways, where it would be billed per GB.

Subnet CIDRs come from `components.planning.subnets` (the same derivation config validation checks), and subnets
carry the tags EKS and the AWS Load Balancer Controller use to discover them (see `subnet_tags`).

An existing VPC is never modified: no VPC, subnet or route is registered, and its subnets must already carry the
load balancer tags if load balancers are wanted (documented in the README).
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
import pulumi_aws as aws

from components.config import StackConfig
from components.planning.subnets import subnet_layout

#: Subnet tags read by EKS and the AWS Load Balancer Controller: `kubernetes.io/role/elb` marks subnets for
#: internet-facing load balancers, `kubernetes.io/role/internal-elb` for internal ones, and
#: `kubernetes.io/cluster/<name>` = `shared` says the subnet may be used by (and is shared with) the cluster
#: (https://docs.aws.amazon.com/eks/latest/userguide/network-load-balancing.html, "subnet tagging";
#: https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/subnet_discovery/).
PUBLIC_LB_TAG = "kubernetes.io/role/elb"
INTERNAL_LB_TAG = "kubernetes.io/role/internal-elb"


def cluster_discovery_tag(cluster_name: str) -> str:
    return f"kubernetes.io/cluster/{cluster_name}"


def subnet_tags(base: Mapping[str, str], cluster_name: str, public: bool, name: str) -> dict[str, str]:
    """Tags of one subnet: the cluster's tags, a Name, cluster discovery and the load balancer role."""
    role_tag = PUBLIC_LB_TAG if public else INTERNAL_LB_TAG
    return {**base, "Name": name, cluster_discovery_tag(cluster_name): "shared", role_tag: "1"}


class Network(pulumi.ComponentResource):
    """VPC, subnets per AZ, routing and NAT, or an existing VPC's subnets.

    Attributes every consumer reads:
      vpc_id, vpc_cidr                 the VPC and its (configured) CIDR
      zones                            AZs in config order
      private_subnet_ids / public_subnet_ids   {az: subnet id}
      nat_gateway_ids                  {az: NAT gateway id} (new VPC only; one entry with `single`)
      s3_endpoint                      the S3 gateway endpoint (new VPC only)
    """

    vpc: aws.ec2.Vpc | None
    s3_endpoint: aws.ec2.VpcEndpoint | None

    def __init__(
        self,
        name: str,
        spec: StackConfig,
        tags: Mapping[str, str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:Network", name, None, opts)
        self.spec = spec
        self.cluster_name = spec.cluster.name
        self.tags = dict(tags)
        network = spec.network
        self.vpc_cidr = str(network.vpc_cidr)
        self.zones: list[str] = network.zones
        self.private_subnet_ids: dict[str, pulumi.Input[str]] = {}
        self.public_subnet_ids: dict[str, pulumi.Input[str]] = {}
        self.nat_gateway_ids: dict[str, pulumi.Output[str]] = {}
        self.vpc = None
        self.s3_endpoint = None
        if network.existing_vpc is not None:
            self.vpc_id: pulumi.Input[str] = network.existing_vpc.vpc_id
            self.private_subnet_ids.update(network.existing_vpc.private_subnet_ids)
            self.public_subnet_ids.update(network.existing_vpc.public_subnet_ids)
        else:
            self._build_vpc(name)
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "privateSubnetIds": self.private_subnet_ids,
                "publicSubnetIds": self.public_subnet_ids,
            }
        )

    # --------------------------------------------------------------------------------------------- queries
    def private_subnet(self, zone: str) -> pulumi.Input[str]:
        """The private subnet of one AZ: EFA training pools and their Lustre file system must share it."""
        if zone not in self.private_subnet_ids:
            known = ", ".join(self.private_subnet_ids) or "none"
            raise KeyError(f"no private subnet in {zone}; the network has private subnets in: {known}")
        return self.private_subnet_ids[zone]

    @property
    def private_subnet_id_list(self) -> list[pulumi.Input[str]]:
        """Private subnets in AZ order, for the EKS control plane's ENIs and multi-AZ node groups."""
        return [self.private_subnet_ids[z] for z in self.zones]

    # ---------------------------------------------------------------------------------------------- build
    def _named(self, suffix: str) -> str:
        return f"{self.cluster_name}-{suffix}"

    def _tags(self, suffix: str, **extra: str) -> dict[str, str]:
        return {**self.tags, "Name": self._named(suffix), **extra}

    def _build_vpc(self, name: str) -> None:
        network = self.spec.network
        child = pulumi.ResourceOptions(parent=self)
        layout = subnet_layout(network)
        vpc = aws.ec2.Vpc(
            self._named("vpc"),
            cidr_block=self.vpc_cidr,
            # EKS requires DNS hostnames and DNS resolution in the VPC (private endpoint resolution, nodes).
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=self._tags("vpc"),
            opts=child,
        )
        self.vpc = vpc
        self.vpc_id = vpc.id
        igw = aws.ec2.InternetGateway(self._named("igw"), vpc_id=vpc.id, tags=self._tags("igw"), opts=child)

        public_rt = aws.ec2.RouteTable(self._named("public"), vpc_id=vpc.id, tags=self._tags("public"), opts=child)
        aws.ec2.Route(
            self._named("public-internet"),
            route_table_id=public_rt.id,
            destination_cidr_block="0.0.0.0/0",
            gateway_id=igw.id,
            opts=child,
        )

        public_subnets: dict[str, aws.ec2.Subnet] = {}
        for zone, cidr in zip(layout.zones, layout.public, strict=True):
            subnet = aws.ec2.Subnet(
                self._named(f"public-{zone}"),
                vpc_id=vpc.id,
                cidr_block=str(cidr),
                availability_zone=zone,
                # Nothing we launch needs a public IP; NAT gateways get Elastic IPs, load balancers their own.
                map_public_ip_on_launch=False,
                tags=subnet_tags(self.tags, self.cluster_name, public=True, name=self._named(f"public-{zone}")),
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                self._named(f"public-{zone}"), subnet_id=subnet.id, route_table_id=public_rt.id, opts=child
            )
            public_subnets[zone] = subnet
            self.public_subnet_ids[zone] = subnet.id

        # NAT gateways: one per AZ in its own public subnet, or a single one in the first AZ.
        nat_zones = list(layout.zones) if network.nat_gateways == "one-per-az" else list(layout.zones[:1])
        for zone in nat_zones:
            eip = aws.ec2.Eip(self._named(f"nat-{zone}"), domain="vpc", tags=self._tags(f"nat-{zone}"), opts=child)
            nat = aws.ec2.NatGateway(
                self._named(f"nat-{zone}"),
                allocation_id=eip.id,
                subnet_id=public_subnets[zone].id,
                connectivity_type="public",
                tags=self._tags(f"nat-{zone}"),
                # The gateway needs the internet gateway attached before it can route.
                opts=pulumi.ResourceOptions(parent=self, depends_on=[igw]),
            )
            self.nat_gateway_ids[zone] = nat.id

        private_route_tables: list[pulumi.Output[str]] = []
        for zone, cidr in zip(layout.zones, layout.private, strict=True):
            subnet = aws.ec2.Subnet(
                self._named(f"private-{zone}"),
                vpc_id=vpc.id,
                cidr_block=str(cidr),
                availability_zone=zone,
                map_public_ip_on_launch=False,
                tags=subnet_tags(self.tags, self.cluster_name, public=False, name=self._named(f"private-{zone}")),
                opts=child,
            )
            route_table = aws.ec2.RouteTable(
                self._named(f"private-{zone}"), vpc_id=vpc.id, tags=self._tags(f"private-{zone}"), opts=child
            )
            nat_id = self.nat_gateway_ids.get(zone, self.nat_gateway_ids[nat_zones[0]])
            aws.ec2.Route(
                self._named(f"private-{zone}-nat"),
                route_table_id=route_table.id,
                destination_cidr_block="0.0.0.0/0",
                nat_gateway_id=nat_id,
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                self._named(f"private-{zone}"), subnet_id=subnet.id, route_table_id=route_table.id, opts=child
            )
            private_route_tables.append(route_table.id)
            self.private_subnet_ids[zone] = subnet.id

        # Gateway endpoints are free; S3 traffic through NAT is billed per GB
        # (https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html).
        self.s3_endpoint = aws.ec2.VpcEndpoint(
            self._named("s3"),
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{self.spec.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[*private_route_tables, public_rt.id],
            tags=self._tags("s3"),
            opts=child,
        )
