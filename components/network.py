"""The cluster's network: a new VPC laid out for EKS, or an existing VPC's subnets passed through.

New VPC, per availability zone: one private subnet (nodes and pods; the VPC CNI gives pods VPC addresses, so these
are the big ones) and one public subnet (NAT gateways and internet-facing load balancers only). Private subnets
reach the internet through a NAT gateway in their own AZ (`one-per-az`, survives the loss of an AZ) or through one
shared gateway (`single`, cheaper for dev stacks). An S3 gateway endpoint keeps S3 traffic (datasets, checkpoints,
Lustre data repositories, container layers) off the NAT gateways, where it would be billed per GB.

Subnet CIDRs come from `components.planning.subnets` (the same derivation config validation checks), and subnets
carry the tags EKS and the AWS Load Balancer Controller use to discover them (see `subnet_tags`).

A new VPC's default security group is taken over and emptied (no rule in or out), and its flow logs are recorded by
`components.flow_logs` once the cluster's KMS key exists.

A new VPC reaches the site (hybrid nodes, the networks admitted to the private endpoint) through the gateway
`network.siteConnection` names: the VPC is attached to that transit gateway or virtual private gateway, and every
private route table sends the site's CIDRs (`components.planning.site_routes`) to it. Static routes, not route
propagation: the routes are exactly the CIDRs the config lists, the same for both gateway kinds, and in the plan
whatever the site advertises (propagation exists for a VGW only, and takes every prefix the VPN or Direct Connect
link learns). The public route table gets none: the cluster's network interfaces, nodes and internal load balancers
sit in the private subnets, the public ones hold only NAT gateways and internet-facing load balancers ([EKSUG]
`hybrid-nodes-networking`: the routes go in the route tables of the subnets passed to the cluster).

An existing VPC is never modified: no VPC, subnet or route is registered, and its subnets must already carry the
load balancer tags if load balancers are wanted (docs/network-and-cluster.md lists them); its route tables must
already reach the site.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from ipaddress import IPv4Network

import pulumi
import pulumi_aws as aws

from components.catalog.regions import partition_of
from components.config import ExistingVpc, NetworkConfig, SiteConnection
from components.planning.s3_endpoint import s3_endpoint_policy
from components.planning.subnets import cluster_subnet_zones, nat_gateway_zones, subnet_layout
from components.tags import SHARED, kubernetes_cluster

#: Subnet tags read by EKS and the AWS Load Balancer Controller: `kubernetes.io/role/elb` marks subnets for
#: internet-facing load balancers, `kubernetes.io/role/internal-elb` for internal ones, and
#: `kubernetes.io/cluster/<name>` = `shared` says the subnet may be used by (and is shared with) the cluster
#: (https://docs.aws.amazon.com/eks/latest/userguide/network-load-balancing.html, "subnet tagging";
#: https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/subnet_discovery/).
PUBLIC_LB_TAG = "kubernetes.io/role/elb"
INTERNAL_LB_TAG = "kubernetes.io/role/internal-elb"


def subnet_tags(base: Mapping[str, str], cluster_name: str, public: bool, name: str) -> dict[str, str]:
    """Tags of one subnet: the cluster's tags, a Name, cluster discovery and the load balancer role."""
    role_tag = PUBLIC_LB_TAG if public else INTERNAL_LB_TAG
    return {**base, "Name": name, kubernetes_cluster(cluster_name): SHARED, role_tag: "1"}


class Network(pulumi.ComponentResource):
    """VPC, subnets per AZ, routing and NAT, or an existing VPC's subnets.

    Attributes every consumer reads:
      vpc_id, vpc_cidr                 the VPC and its (configured) CIDR
      zones                            AZs in config order
      private_subnet_ids / public_subnet_ids   {az: subnet id}
      nat_gateway_ids                  {az: NAT gateway id} (new VPC only; one entry with `single`)
      s3_endpoint                      the S3 gateway endpoint (new VPC only)
      site_routes                      the routes to the site's CIDRs (new VPC with a site connection only): what
                                       must exist before anything on the site can reach the API
    """

    vpc: aws.ec2.Vpc | None
    s3_endpoint: aws.ec2.VpcEndpoint | None

    def __init__(
        self,
        name: str,
        network: NetworkConfig,
        cluster_name: str,
        region: str,
        tags: Mapping[str, str],
        site_cidrs: Sequence[str] = (),
        s3_buckets: Sequence[str] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`site_cidrs` are the CIDRs a new VPC routes to `network.site_connection`
        (`components.planning.site_routes.site_cidrs`); `s3_buckets` the buckets its S3 endpoint admits
        (`components.planning.s3_endpoint.stack_buckets`)."""
        super().__init__("gpu-clusters:index:Network", name, None, opts)
        self.network = network
        self.cluster_name = cluster_name
        self.region = region
        self.tags = dict(tags)
        self.s3_buckets = list(s3_buckets)
        self.vpc_cidr = str(network.vpc_cidr)
        self.zones: list[str] = network.zones
        self.private_subnet_ids: dict[str, pulumi.Input[str]] = {}
        self.public_subnet_ids: dict[str, pulumi.Input[str]] = {}
        self.nat_gateway_ids: dict[str, pulumi.Output[str]] = {}
        self.site_cidrs = list(site_cidrs)
        self.site_routes: list[aws.ec2.Route] = []
        self.vpc = None
        self.s3_endpoint = None
        if network.existing_vpc is not None:
            self._existing_vpc(network.existing_vpc)
        else:
            self._new_vpc()
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "privateSubnetIds": self.private_subnet_ids,
                "publicSubnetIds": self.public_subnet_ids,
            }
        )

    # --------------------------------------------------------------------------------------------- queries
    @property
    def private_subnet_id_list(self) -> list[pulumi.Input[str]]:
        """Private subnets in AZ order, for the EKS control plane's ENIs and multi-AZ node groups."""
        return [self.private_subnet_ids[z] for z in self.zones]

    def cluster_subnet_ids(self) -> pulumi.Input[list[pulumi.Input[str]]]:
        """The private subnets EKS places the control plane's network interfaces in: those of every AZ but the ones
        whose zone ID EKS refuses (`planning.subnets.cluster_subnet_zones`). With every AZ in
        `network.availabilityZoneIds` (validation has refused a refused ID there) that is all of them; otherwise the
        names are resolved to this account's zone IDs at deploy time (ec2 DescribeAvailabilityZones)."""
        ids = self.network.availability_zone_ids
        if all(zone in ids for zone in self.zones):
            return [self.private_subnet_ids[z] for z in cluster_subnet_zones(self.zones, ids)]
        answer = aws.get_availability_zones_output(opts=pulumi.InvokeOutputOptions(parent=self))
        kept = answer.apply(lambda r: cluster_subnet_zones(self.zones, dict(zip(r.names, r.zone_ids, strict=True))))
        subnets = pulumi.Output.from_input(self.private_subnet_ids)
        return pulumi.Output.all(kept, subnets).apply(lambda pair: [pair[1][z] for z in pair[0]])

    def _placed_in(self, zone: str) -> tuple[str | None, str | None]:
        """Where a subnet goes, as (AZ name, zone ID), one of them set: by zone ID when `network.availabilityZoneIds`
        maps the AZ (the same physical zone in every account; EC2 CreateSubnet takes either), else by name."""
        zone_id = self.network.availability_zone_ids.get(zone)
        return (None, zone_id) if zone_id else (zone, None)

    # ---------------------------------------------------------------------------------------------- build
    def _named(self, suffix: str) -> str:
        return f"{self.cluster_name}-{suffix}"

    def _tags(self, suffix: str, **extra: str) -> dict[str, str]:
        return {**self.tags, "Name": self._named(suffix), **extra}

    def _existing_vpc(self, existing: ExistingVpc) -> None:
        """Pass an existing VPC's ids through untouched: the stack must never modify a network it does not own."""
        self.vpc_id: pulumi.Input[str] = existing.vpc_id
        self.private_subnet_ids.update(existing.private_subnet_ids)
        self.public_subnet_ids.update(existing.public_subnet_ids)

    def _new_vpc(self) -> None:
        """A VPC laid out for EKS: public subnets behind an internet gateway, private ones behind NAT, S3 endpoint."""
        layout = subnet_layout(self.network)
        vpc = self._vpc()
        igw = aws.ec2.InternetGateway(
            self._named("igw"), vpc_id=vpc.id, tags=self._tags("igw"), opts=pulumi.ResourceOptions(parent=self)
        )
        public_rt = self._public_route_table(vpc, igw)
        public_subnets = self._public_subnets(vpc, public_rt, layout.zones, layout.public)
        nat_zones = self._nat_gateways(igw, public_subnets)
        private_route_tables = self._private_subnets(vpc, nat_zones, layout.zones, layout.private)
        self._s3_endpoint(vpc, [route_table.id for route_table in private_route_tables.values()] + [public_rt.id])
        if self.network.site_connection is not None:
            self._site_routes(vpc, self.network.site_connection, private_route_tables)

    def _vpc(self) -> aws.ec2.Vpc:
        """The VPC with DNS hostnames and resolution on: EKS needs both (private endpoint resolution, nodes)."""
        vpc = aws.ec2.Vpc(
            self._named("vpc"),
            cidr_block=self.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=self._tags("vpc"),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.vpc = vpc
        self.vpc_id = vpc.id
        self._default_security_group(vpc)
        return vpc

    def _default_security_group(self, vpc: aws.ec2.Vpc) -> None:
        """Take over the VPC's default security group and leave it without a rule: anything launched into the VPC
        without a group of its own then talks to nothing, instead of to every other member of the default group
        (Security Hub EC2.2, "VPC default security groups should not allow inbound or outbound traffic"). Nothing of
        the stack uses it. On `pulumi destroy` Pulumi only forgets it; it goes with the VPC
        (https://www.pulumi.com/registry/packages/aws/api-docs/ec2/defaultsecuritygroup/)."""
        aws.ec2.DefaultSecurityGroup(
            self._named("default"),
            vpc_id=vpc.id,
            ingress=[],
            egress=[],
            tags=self._tags("default"),
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _public_route_table(self, vpc: aws.ec2.Vpc, igw: aws.ec2.InternetGateway) -> aws.ec2.RouteTable:
        """One route table for every public subnet: the default route goes out through the internet gateway."""
        child = pulumi.ResourceOptions(parent=self)
        public_rt = aws.ec2.RouteTable(self._named("public"), vpc_id=vpc.id, tags=self._tags("public"), opts=child)
        aws.ec2.Route(
            self._named("public-internet"),
            route_table_id=public_rt.id,
            destination_cidr_block="0.0.0.0/0",
            gateway_id=igw.id,
            opts=child,
        )
        return public_rt

    def _public_subnets(
        self, vpc: aws.ec2.Vpc, public_rt: aws.ec2.RouteTable, zones: Sequence[str], cidrs: Sequence[IPv4Network]
    ) -> dict[str, aws.ec2.Subnet]:
        """One public subnet per AZ, for NAT gateways and internet-facing load balancers only."""
        child = pulumi.ResourceOptions(parent=self)
        public_subnets: dict[str, aws.ec2.Subnet] = {}
        for zone, cidr in zip(zones, cidrs, strict=True):
            subnet = aws.ec2.Subnet(
                self._named(f"public-{zone}"),
                vpc_id=vpc.id,
                cidr_block=str(cidr),
                availability_zone=self._placed_in(zone)[0],
                availability_zone_id=self._placed_in(zone)[1],
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
        return public_subnets

    def _nat_gateways(self, igw: aws.ec2.InternetGateway, public_subnets: Mapping[str, aws.ec2.Subnet]) -> list[str]:
        """NAT gateways, one per AZ (survives an AZ's loss) or a single one in the first AZ
        (`components.planning.subnets.nat_gateway_zones`); returns their AZs."""
        nat_zones = list(nat_gateway_zones(self.network))
        for zone in nat_zones:
            eip = aws.ec2.Eip(
                self._named(f"nat-{zone}"),
                domain="vpc",
                tags=self._tags(f"nat-{zone}"),
                opts=pulumi.ResourceOptions(parent=self),
            )
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
        return list(nat_zones)

    def _private_subnets(
        self, vpc: aws.ec2.Vpc, nat_zones: Sequence[str], zones: Sequence[str], cidrs: Sequence[IPv4Network]
    ) -> dict[str, aws.ec2.RouteTable]:
        """One private subnet per AZ for nodes and pods, routed through its AZ's NAT gateway (else the single one);
        returns the route tables by AZ, which the S3 endpoint joins and the site routes go in."""
        child = pulumi.ResourceOptions(parent=self)
        private_route_tables: dict[str, aws.ec2.RouteTable] = {}
        for zone, cidr in zip(zones, cidrs, strict=True):
            subnet = aws.ec2.Subnet(
                self._named(f"private-{zone}"),
                vpc_id=vpc.id,
                cidr_block=str(cidr),
                availability_zone=self._placed_in(zone)[0],
                availability_zone_id=self._placed_in(zone)[1],
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
            private_route_tables[zone] = route_table
            self.private_subnet_ids[zone] = subnet.id
        return private_route_tables

    def _site_routes(
        self, vpc: aws.ec2.Vpc, site: SiteConnection, route_tables: Mapping[str, aws.ec2.RouteTable]
    ) -> None:
        """Attach the VPC to the site's gateway and route each site CIDR to it from every private route table.

        A transit gateway attachment takes one subnet per AZ, the private ones here (its network interfaces live
        there); a virtual private gateway is attached to the VPC as a whole ([EKSUG] `hybrid-nodes-networking`,
        step 3). A route naming a gateway that is not yet attached is refused, so each route waits for the
        attachment."""
        attachment: pulumi.Resource
        if site.transit_gateway_id is not None:
            attachment = aws.ec2transitgateway.VpcAttachment(
                self._named("site"),
                transit_gateway_id=site.transit_gateway_id,
                vpc_id=vpc.id,
                subnet_ids=self.private_subnet_id_list,
                tags=self._tags("site"),
                opts=pulumi.ResourceOptions(parent=self),
            )
        elif site.virtual_private_gateway_id is not None:
            attachment = aws.ec2.VpnGatewayAttachment(
                self._named("site"),
                vpc_id=vpc.id,
                vpn_gateway_id=site.virtual_private_gateway_id,
                opts=pulumi.ResourceOptions(parent=self),
            )
        else:
            raise ValueError("network.siteConnection names no gateway (config validation refuses that)")
        after_attachment = pulumi.ResourceOptions(parent=self, depends_on=[attachment])
        for zone, route_table in route_tables.items():
            for cidr in self.site_cidrs:
                self.site_routes.append(
                    aws.ec2.Route(
                        self._named(f"private-{zone}-site-{cidr.replace('.', '-').replace('/', '-')}"),
                        route_table_id=route_table.id,
                        destination_cidr_block=cidr,
                        # One of the two is set: a VGW is a route's `gateway_id`, as an internet gateway is.
                        transit_gateway_id=site.transit_gateway_id,
                        gateway_id=site.virtual_private_gateway_id,
                        opts=after_attachment,
                    )
                )

    def _s3_endpoint(self, vpc: aws.ec2.Vpc, route_table_ids: Sequence[pulumi.Input[str]]) -> None:
        """An S3 gateway endpoint on every route table: gateway endpoints are free, S3 traffic through NAT is billed
        per GB (https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html). Its policy admits the
        stack's buckets and the AWS buckets nodes read, nothing else."""
        self.s3_endpoint = aws.ec2.VpcEndpoint(
            self._named("s3"),
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{self.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=list(route_table_ids),
            # Only the stack's buckets and the AWS buckets nodes read (`components.planning.s3_endpoint`).
            policy=json.dumps(s3_endpoint_policy(self.region, self.s3_buckets, partition_of(self.region))),
            tags=self._tags("s3"),
            opts=pulumi.ResourceOptions(parent=self),
        )
