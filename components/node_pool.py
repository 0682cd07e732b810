"""One `aws` node pool: a launch template and either a self-managed Auto Scaling group or an EKS managed node group
(`PoolPlan.management`), plus its EFA plumbing.

Both kinds run the same launch template (EFA interfaces, placement group, capacity targeting, the pinned AMI and its
NodeConfig); a managed pool's template leaves out what EKS sets itself (the instance profile, and the instance type
of a spot pool). Every decision is already made in the pool's `PoolPlan` (components.planning.pools,
components.planning.management) and the pure renderers (nodeadm, autoscaler_tags, node_groups); this component only
turns them into resources (docs/node-pools.md, "Management and node auto repair").

Resources per pool:
- launch template: the EKS-optimized AMI (SSM parameter), nodeadm/Bottlerocket user data, IMDSv2, encrypted gp3,
  network interfaces (every EFA device of the type, or one plain ENA), placement group and capacity targeting;
- EFA pools: a security group whose members may exchange all traffic with each other, both ways;
- placement-group pools: a cluster placement group;
- self-managed: the Auto Scaling group, with spot diversification, instance refresh, and the tags that the
  autoscaler, the node termination handler, cost reports and the policy pack read;
- managed: the EKS node group (capacity type, spot types, update config, node auto repair), and the autoscaler's
  node-template tags on the Auto Scaling group EKS creates for it;
- capacity-block pools: a scheduled action that sets the group to zero before the block ends, so its nodes drain
  through the terminate lifecycle hook (components.planning.reservations).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

from components import tags
from components.context import ClusterContext
from components.planning import nodeadm
from components.planning.autoscaler_tags import OWNER_TAG_PREFIX, autoscaler_tags, discovery_tags
from components.planning.dra import allocates_through_dra
from components.planning.efa import NetworkInterface
from components.planning.node_groups import NodeGroupSettings, node_group_settings
from components.planning.pools import PoolPlan, refresh_healthy_percentages
from components.planning.reservations import SCHEDULE_TIME_ZONE, schedule_name_suffix, yearly_recurrence
from components.security_groups import allow_all_within

#: ASG health check grace period: the AWS console's default (https://docs.aws.amazon.com/autoscaling/ec2/userguide/
#: health-check-grace-period.html). GPU nodes with the NVIDIA AMI and a RAID0 build take minutes to boot; EC2
#: status checks must not replace them while they do.
HEALTH_CHECK_GRACE_SECONDS = 300
#: Root device names. AL2023 boots from /dev/xvda; Bottlerocket keeps its OS on /dev/xvda and images, pods and logs
#: on the data volume /dev/xvdb (https://github.com/bottlerocket-os/bottlerocket#default-volumes), so that is the
#: volume `rootVolumeGiB` sizes there.
AL2023_ROOT_DEVICE = "/dev/xvda"
BOTTLEROCKET_OS_DEVICE = "/dev/xvda"
BOTTLEROCKET_DATA_DEVICE = "/dev/xvdb"
#: Launch template tag specifications: the instance and everything it creates get the pool's tags.
TAGGED_AT_LAUNCH = ("instance", "volume", "network-interface")


class NodePool(pulumi.ComponentResource):
    """A GPU (or CPU) node pool built from a `PoolPlan`: self-managed or an EKS managed node group."""

    #: The self-managed group; None on a managed pool, whose group EKS creates (`asg_name`).
    asg: aws.autoscaling.Group | None
    node_group: aws.eks.NodeGroup | None
    #: The name of the pool's Auto Scaling group, either kind: what the terminate hook, the scheduled scale-in and the
    #: exports name.
    asg_name: pulumi.Output[str]
    launch_template: aws.ec2.LaunchTemplate
    block_end: aws.autoscaling.Schedule | None
    efa_security_group: aws.ec2.SecurityGroup | None
    placement_group: aws.ec2.PlacementGroup | None

    def __init__(
        self,
        name: str,
        plan: PoolPlan,
        ctx: ClusterContext,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-clusters:index:NodePool", name, None, opts)
        require_buildable(plan, ctx)
        self.plan = plan
        self._ctx = ctx
        child = pulumi.ResourceOptions(parent=self)
        self.pool_tags = pool_tags(ctx, plan)
        self.efa_security_group = self._efa_security_group(name, child) if plan.efa else None
        self.placement_group = self._placement_group(name, child) if plan.placement_group else None
        self.managed = plan.management == "managed"
        self.launch_template = self._launch_template(name, child)
        self.asg, self.node_group, self.group_tags = None, None, []
        if self.managed:
            self.node_group = self._node_group(name, child, node_group_settings(plan))
            self.asg_name = self.node_group.resources.apply(generated_group_name)
            self.group_tags = self._generated_group_tags(name, child)
        else:
            self.asg = self._auto_scaling_group(name, child)
            self.asg_name = self.asg.name
        self.block_end = self._capacity_block_end(name, child) if plan.scale_to_zero_at else None
        self.register_outputs(
            {
                "asgName": self.asg_name,
                "launchTemplateId": self.launch_template.id,
                "efaSecurityGroupId": self.efa_security_group.id if self.efa_security_group else None,
            }
        )

    @property
    def group(self) -> pulumi.Resource:
        """The resource that brings up the pool's nodes: the node group of a managed pool, else the group."""
        group = self.node_group if self.node_group is not None else self.asg
        assert group is not None
        return group

    # ------------------------------------------------------------------------------------------------ EFA
    def _placement_group(self, name: str, child: pulumi.ResourceOptions) -> aws.ec2.PlacementGroup:
        """A cluster placement group: EFA training nodes on the same network spine (lowest latency between them)."""
        return aws.ec2.PlacementGroup(name, strategy="cluster", tags=self.pool_tags, opts=child)

    def _efa_security_group(self, name: str, child: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
        """A group whose members may exchange all traffic, both ways: what EFA's OS bypass requires.

        AWS: "the EFA must be a member of a security group that allows all inbound and outbound traffic to and from
        the security group itself" (facts §2). The egress self rule is needed even next to a 0.0.0.0/0 egress rule:
        SRD traffic is authorized by group membership, not by CIDR. Standalone rule resources (not inline rules),
        so nothing else that manages rules of this group is fought over.
        """
        sg = aws.ec2.SecurityGroup(
            f"{name}-efa",
            vpc_id=self._ctx.vpc_id,
            description=f"EFA: all traffic between members, pool {self.plan.name} ({self._ctx.cluster_name_plain})",
            tags={**self.pool_tags, "Name": f"{self._ctx.cluster_name_plain}-{self.plan.name}-efa"},
            opts=child,
        )
        allow_all_within(f"{name}-efa", sg.id, "EFA", self.pool_tags, pulumi.ResourceOptions(parent=sg))
        return sg

    # ------------------------------------------------------------------------------------- launch template
    def _launch_template(self, name: str, child: pulumi.ResourceOptions) -> aws.ec2.LaunchTemplate:
        plan, ctx, pool = self.plan, self._ctx, self.plan.pool
        assert plan.instance is not None and plan.ami_release is not None  # checked in __init__
        parameter = nodeadm.ami_ssm_parameter(
            ctx.kubernetes_version, pool.ami_family, plan.instance.arch, plan.is_gpu, plan.ami_release
        )
        ami = aws.ssm.get_parameter_output(name=parameter, opts=pulumi.InvokeOutputOptions(parent=self))
        placement = (
            aws.ec2.LaunchTemplatePlacementArgs(group_name=self.placement_group.name) if self.placement_group else None
        )
        return aws.ec2.LaunchTemplate(
            name,
            description=f"{ctx.cluster_name_plain} pool {plan.name}: {plan.instance.name}, {plan.capacity_type}",
            image_id=ami.value,
            instance_type=None if (self.managed and plan.capacity_type == "spot") else plan.instance.name,
            user_data=self._user_data(),
            # EKS refuses an instance profile in a managed node group's template: it uses the node group's role.
            iam_instance_profile=None
            if self.managed
            else aws.ec2.LaunchTemplateIamInstanceProfileArgs(arn=ctx.node_instance_profile_arns[plan.name]),
            network_interfaces=self._network_interfaces(),
            metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
                http_endpoint="enabled",
                http_tokens="required",
                http_put_response_hop_limit=pool.imds_hop_limit,
            ),
            block_device_mappings=self._block_devices(),
            placement=placement,
            instance_market_options=(
                aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type="capacity-block")
                if plan.capacity_type == "capacity-block"
                else None
            ),
            capacity_reservation_specification=self._capacity_reservation(),
            tag_specifications=[
                aws.ec2.LaunchTemplateTagSpecificationArgs(
                    resource_type=kind,
                    tags={**self._instance_tags(), "Name": f"{ctx.cluster_name_plain}-{plan.name}"}
                    if kind == "instance"
                    else self.pool_tags,
                )
                for kind in TAGGED_AT_LAUNCH
            ],
            update_default_version=True,
            tags=self._launch_template_tags(),
            opts=child,
        )

    def _instance_tags(self) -> dict[str, str]:
        """The pool's tags; on a managed pool also what a self-managed group propagates to its instances (the node
        identity tag and the termination handler's opt-in, `propagated_tags`), since EKS's group propagates none of
        the pool's tags."""
        return propagated_tags(self._ctx, self.plan) if self.managed else dict(self.pool_tags)

    def _launch_template_tags(self) -> dict[str, str]:
        """The pool's tags, and the reason for an IMDS hop limit above 1 (validation requires one)."""
        reason = self.plan.pool.imds_hop_limit_reason
        return {**self.pool_tags, tags.IMDS_HOP_LIMIT_REASON: reason} if reason else dict(self.pool_tags)

    def _user_data(self) -> pulumi.Output[str]:
        """Base64 user data (launch templates take it encoded), rendered once the cluster's coordinates are known."""
        plan, ctx = self.plan, self._ctx
        service_cidr = ctx.service_cidr

        lustre_script = ctx.lustre_boot_script if plan.lustre_client is not None else None

        def render(values: list[str]) -> str:
            cluster_name, endpoint, certificate_authority, boot_script = values
            if plan.pool.ami_family == "bottlerocket":
                text = nodeadm.bottlerocket_user_data(
                    nodeadm.bottlerocket_settings(cluster_name, endpoint, certificate_authority, service_cidr, plan)
                )
            else:
                text = nodeadm.pool_user_data(
                    nodeadm.node_config(cluster_name, endpoint, certificate_authority, service_cidr, plan),
                    plan,
                    boot_script,
                )
            return base64.b64encode(text.encode()).decode()

        return pulumi.Output.all(ctx.cluster_name, ctx.endpoint, ctx.certificate_authority, lustre_script).apply(render)

    def _network_interfaces(self) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgs]:
        """Every EFA device of the type in AWS's layout (`plan.interfaces`), or one plain ENA for other pools.

        The node and EFA security groups go on every interface: the EFA self-rule only authorizes traffic on
        interfaces that are members. No public IPs: nodes live in private subnets, and AWS cannot auto-assign a
        public IP to an instance with several interfaces anyway (facts §2).
        """
        groups: list[pulumi.Input[str]] = [self._ctx.node_security_group_id]
        if self.efa_security_group is not None:
            groups.append(self.efa_security_group.id)
        if self.plan.lustre_client is not None and self._ctx.lustre_client_security_group_id is not None:
            groups.append(self._ctx.lustre_client_security_group_id)
        interfaces = self.plan.interfaces or (NetworkInterface(0, 0, "interface"),)
        return [
            aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                network_card_index=interface.network_card_index,
                device_index=interface.device_index,
                interface_type=interface.interface_type if self.plan.interfaces else None,
                security_groups=groups,
                associate_public_ip_address="false",
                delete_on_termination="true",
            )
            for interface in interfaces
        ]

    def _block_devices(self) -> list[aws.ec2.LaunchTemplateBlockDeviceMappingArgs]:
        """gp3 volumes encrypted with the cluster's KMS key, sized by `rootVolumeGiB` (the kubelet/containerd disk)."""
        pool, kms = self.plan.pool, self._ctx.kms_key_arn

        def volume(device: str, size: int | None) -> aws.ec2.LaunchTemplateBlockDeviceMappingArgs:
            return aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=device,
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=size,
                    volume_type="gp3",
                    encrypted="true",
                    kms_key_id=kms,
                    delete_on_termination="true",
                ),
            )

        if pool.ami_family == "bottlerocket":
            # The OS volume keeps the AMI's snapshot size; only the data volume is sized.
            return [volume(BOTTLEROCKET_OS_DEVICE, None), volume(BOTTLEROCKET_DATA_DEVICE, pool.root_volume_gib)]
        return [volume(AL2023_ROOT_DEVICE, pool.root_volume_gib)]

    def _capacity_reservation(self) -> aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs | None:
        """Capacity blocks and reservations are targeted explicitly; other pools leave EC2's default (`open`)."""
        capacity = self.plan.pool.capacity
        if capacity.type == "capacity-block" or (capacity.type == "reservation" and capacity.reservation_id):
            target = aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_id=capacity.reservation_id
            )
        elif capacity.type == "reservation":
            target = aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                capacity_reservation_resource_group_arn=capacity.reservation_resource_group_arn
            )
        else:
            return None
        return aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(capacity_reservation_target=target)

    # ---------------------------------------------------------------------------------- Auto Scaling group
    def _auto_scaling_group(self, name: str, child: pulumi.ResourceOptions) -> aws.autoscaling.Group:
        """The group. Three choices matter on later `pulumi up` runs:

        - `desiredCapacity` is set at creation and then ignored, so Pulumi never undoes the autoscaler's work;
        - the template is referenced by its latest version number (not `$Latest`), so a template change is an ASG
          change, which is what starts an instance refresh;
        - `wait_for_capacity_timeout="0"`: a capacity block that starts next week or a spot market without capacity
          must not fail the deployment; the autoscaler owns reaching the size.

        The group launches as the stack's own Auto Scaling service-linked role, the one the cluster key's policy names
        (`components.cluster`); without it Auto Scaling would use, or first create, the account's default role.
        """
        plan, ctx = self.plan, self._ctx
        version = self.launch_template.latest_version.apply(str)
        spot = plan.capacity_type == "spot"
        launch_template = (
            None if spot else aws.autoscaling.GroupLaunchTemplateArgs(id=self.launch_template.id, version=version)
        )
        return aws.autoscaling.Group(
            name,
            vpc_zone_identifiers=[ctx.private_subnet_ids[zone] for zone in plan.availability_zones],
            min_size=plan.min_nodes,
            max_size=plan.max_nodes,
            desired_capacity=plan.initial_nodes,
            launch_template=launch_template,
            mixed_instances_policy=self._mixed_instances_policy(version) if spot else None,
            capacity_rebalance=spot,
            protect_from_scale_in=False,
            health_check_type="EC2",
            health_check_grace_period=HEALTH_CHECK_GRACE_SECONDS,
            wait_for_capacity_timeout="0",
            instance_refresh=self._instance_refresh(),
            service_linked_role_arn=ctx.autoscaling_role_arn,
            tags=[
                aws.autoscaling.GroupTagArgs(
                    key=str(tag["key"]), value=str(tag["value"]), propagate_at_launch=bool(tag["propagate_at_launch"])
                )
                for tag in asg_tags(ctx, plan)
            ],
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(ignore_changes=["desiredCapacity"])),
        )

    def _mixed_instances_policy(self, version: pulumi.Output[str]) -> aws.autoscaling.GroupMixedInstancesPolicyArgs:
        """Spot across every same-shape type (`plan.instance_types`, primary first) with the configured split."""
        capacity = self.plan.pool.capacity
        return aws.autoscaling.GroupMixedInstancesPolicyArgs(
            instances_distribution=aws.autoscaling.GroupMixedInstancesPolicyInstancesDistributionArgs(
                on_demand_base_capacity=capacity.on_demand_base_capacity,
                on_demand_percentage_above_base_capacity=capacity.on_demand_percentage_above_base,
                spot_allocation_strategy=capacity.spot_allocation_strategy,
            ),
            launch_template=aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateArgs(
                launch_template_specification=(
                    aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateLaunchTemplateSpecificationArgs(
                        launch_template_id=self.launch_template.id, version=version
                    )
                ),
                overrides=[
                    aws.autoscaling.GroupMixedInstancesPolicyLaunchTemplateOverrideArgs(instance_type=instance_type)
                    for instance_type in self.plan.instance_types
                ],
            ),
        )

    def _instance_refresh(self) -> aws.autoscaling.GroupInstanceRefreshArgs | None:
        """Rolling replacement on template changes (a new `amiRelease`, user data), only where the plan wants it:
        training pools default off, so a running job never loses its nodes to an upgrade.

        A refresh terminates through the group, so every replaced node passes the terminate lifecycle hook and is
        drained first (components.planning.drain). `SkipMatching` leaves nodes already on the new version alone.
        """
        if not self.plan.instance_refresh:
            return None
        refresh = self.plan.pool.instance_refresh
        low, high = refresh_healthy_percentages(self.plan.pool)
        return aws.autoscaling.GroupInstanceRefreshArgs(
            strategy="Rolling",
            preferences=aws.autoscaling.GroupInstanceRefreshPreferencesArgs(
                min_healthy_percentage=low,
                max_healthy_percentage=high,
                instance_warmup=str(refresh.instance_warmup_seconds),
                skip_matching=refresh.skip_matching,
            ),
        )

    # ------------------------------------------------------------------------------------ managed node group
    def _node_group(self, name: str, child: pulumi.ResourceOptions, settings: NodeGroupSettings) -> aws.eks.NodeGroup:
        """The EKS managed node group on the pool's launch template (components.planning.node_groups).

        The template names the pinned AMI, so EKS merges no user data and takes no `amiType`/`releaseVersion`: the
        NodeConfig registers labels, taints and maxPods exactly as on a self-managed node, and the node group's
        own `labels`/`taints` stay empty (EKS would apply them only after the node joined, and could put back a
        startup taint the health gate had removed). The desired size is set at creation and then ignored, as on a
        self-managed group. `forceUpdateVersion` stays off: an update whose pods cannot leave within their
        disruption budgets fails instead of killing them. EKS creates the node role's access entry itself
        (components.identity).
        """
        plan, ctx = self.plan, self._ctx
        repair, update = settings.repair, settings.update
        return aws.eks.NodeGroup(
            name,
            cluster_name=ctx.cluster_name,
            node_role_arn=ctx.node_role_arns[plan.name],
            subnet_ids=[ctx.private_subnet_ids[zone] for zone in plan.availability_zones],
            capacity_type=settings.capacity_type,
            instance_types=list(settings.instance_types) if settings.instance_types else None,
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(
                id=self.launch_template.id, version=self.launch_template.latest_version.apply(str)
            ),
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=settings.min_size, max_size=settings.max_size, desired_size=settings.desired_size
            ),
            update_config=aws.eks.NodeGroupUpdateConfigArgs(
                max_unavailable=update.max_unavailable,
                max_unavailable_percentage=update.max_unavailable_percentage,
                update_strategy=update.strategy,
            ),
            node_repair_config=aws.eks.NodeGroupNodeRepairConfigArgs(
                enabled=repair.enabled,
                max_parallel_nodes_repaired_count=repair.max_parallel_count,
                max_parallel_nodes_repaired_percentage=repair.max_parallel_percentage,
                max_unhealthy_node_threshold_count=repair.max_unhealthy_count,
                max_unhealthy_node_threshold_percentage=repair.max_unhealthy_percentage,
                node_repair_config_overrides=[
                    aws.eks.NodeGroupNodeRepairConfigNodeRepairConfigOverrideArgs(
                        node_monitoring_condition=o.condition,
                        node_unhealthy_reason=o.reason,
                        min_repair_wait_time_mins=o.wait_minutes,
                        repair_action=o.action,
                    )
                    for o in repair.overrides
                ]
                or None,
            ),
            force_update_version=False,
            tags=dict(self.pool_tags),
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(ignore_changes=["scalingConfig.desiredSize"])
            ),
        )

    def _generated_group_tags(self, name: str, child: pulumi.ResourceOptions) -> list[aws.autoscaling.Tag]:
        """cluster-autoscaler's node-template tags on the group EKS created, one `aws.autoscaling.Tag` each, kept on
        the group (not propagated). EKS puts the two auto-discovery tags there itself (EKS user guide, "Managed node
        groups concepts"), so they are left out; cluster-autoscaler reads the resources, labels and taints of a
        managed group's template from its Auto Scaling group's tags as from a self-managed one ([CAMNG] aws_manager.go
        `buildNodeFromTemplate`).

        With them goes the cluster's own tag, which the health loop's role is held to (SetInstanceHealth on groups
        that carry it, components.planning.node_health_repair): EKS does not pass the node group's tags on to its
        group, so a managed pool's failed gate could not be repaired without it."""
        discovery = discovery_tags(self._ctx.cluster_name_plain)
        template = {
            k: v for k, v in autoscaler_tags(self._ctx.cluster_name_plain, self.plan).items() if k not in discovery
        }
        template[tags.CLUSTER] = self._ctx.cluster_name_plain
        return [
            aws.autoscaling.Tag(
                f"{name}-{group_tag_suffix(key)}",
                autoscaling_group_name=self.asg_name,
                tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
                opts=child,
            )
            for key, value in sorted(template.items())
        ]

    def _capacity_block_end(self, name: str, child: pulumi.ResourceOptions) -> aws.autoscaling.Schedule:
        """Set the group to zero (min, max and desired) at `plan.scale_to_zero_at`, ahead of the block's end: each
        node then leaves through the terminate hook, drained by the handler, before EC2 reclaims the block
        (components.planning.reservations).

        A recurring action at that minute of the year, with no start time, so it outlives its first run and the
        stack never sends a past start time (`yearly_recurrence`). Its name carries the moment, so the next block's
        end time replaces it. After it runs the group stays at zero: the next `pulumi up --refresh` reads the zeros
        and sets the configured sizes again [PULUMIDRIFT] (docs/node-pools.md, "After the block")."""
        moment = self.plan.scale_to_zero_at
        assert moment is not None
        return aws.autoscaling.Schedule(
            f"{name}-block-end",
            scheduled_action_name=(
                f"{self._ctx.cluster_name_plain}-{self.plan.name}-capacity-block-end-{schedule_name_suffix(moment)}"
            ),
            autoscaling_group_name=self.asg_name,
            recurrence=yearly_recurrence(moment),
            time_zone=SCHEDULE_TIME_ZONE,
            min_size=0,
            max_size=0,
            desired_capacity=0,
            opts=child,
        )


def require_buildable(plan: PoolPlan, ctx: ClusterContext) -> None:
    """Refuse a plan this component cannot build: hybrid pools have no launch template, every pool boots a pinned
    image release, and every planned AZ needs a private subnet. Config validation reports these first; this guards
    direct construction."""
    if plan.kind != "aws" or plan.instance is None:
        raise ValueError(f"pool {plan.name}: NodePool builds `aws` pools with an instance type; got {plan.kind}")
    if plan.ami_release is None:
        raise ValueError(f"pool {plan.name}: no {plan.pool.ami_family} image release pinned (cluster config)")
    missing = [zone for zone in plan.availability_zones if zone not in ctx.private_subnet_ids]
    if not plan.availability_zones or missing:
        raise ValueError(
            f"pool {plan.name}: no private subnet for AZ(s) {', '.join(missing) or '(none planned)'}; "
            f"the network has {', '.join(sorted(ctx.private_subnet_ids))}"
        )


def pool_tags(ctx: ClusterContext, plan: PoolPlan) -> dict[str, str]:
    """Tags of every AWS resource of the pool: the cluster's, plus what cost reports and policies group by."""
    out = tags.with_tags(ctx.tags, pool=plan.name, role=plan.role, capacity_type=plan.capacity_type)
    if plan.gpu_model and plan.is_gpu:
        out[tags.GPU_MODEL] = plan.gpu_model
    if plan.registration_taints:
        out[tags.TAINTS] = ",".join(taint.render() for taint in plan.registration_taints)
    if plan.efa:
        out[tags.EFA_DEVICES] = str(plan.efa_devices)
    if allocates_through_dra(plan):
        out[tags.GPU_ALLOCATION] = plan.pool.gpu_allocation
    return out


def asg_tags(ctx: ClusterContext, plan: PoolPlan) -> list[dict[str, object]]:
    """The ASG's tags in its list form.

    The pool's tags, the node identity tag `kubernetes.io/cluster/<cluster>=owned` EKS requires on self-managed
    nodes (components.tags) and the termination handler's opt-in tag propagate to instances: every pool drains
    through the handler when its group terminates an instance (components.planning.drain). The
    autoscaler's tags do not: cluster-autoscaler reads them from the group, and an instance holds at most 50 tags
    (https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html), which dozens of node-template tags
    copied onto every node would eat into.
    """
    group_only = autoscaler_tags(ctx.cluster_name_plain, plan)
    return tags.asg_tags(propagated_tags(ctx, plan)) + tags.asg_tags(group_only, propagate_at_launch=False)


def propagated_tags(ctx: ClusterContext, plan: PoolPlan) -> dict[str, str]:
    """What every instance of the pool carries: the pool's tags, the node identity tag and the termination
    handler's opt-in."""
    return {
        **pool_tags(ctx, plan),
        tags.kubernetes_cluster(ctx.cluster_name_plain): tags.OWNED,
        tags.NTH_MANAGED: "true",
    }


def group_tag_suffix(key: str) -> str:
    """A tag resource's name from its key, so each key keeps its resource when others come and go (a name by
    position would hand a key to a new resource, and deleting the old one would remove the tag)."""
    return key.removeprefix(OWNER_TAG_PREFIX).replace("/", "-")


def generated_group_name(resources: Sequence[aws.eks.outputs.NodeGroupResource]) -> str:
    """The name of the one Auto Scaling group EKS created for a node group (its `resources` output)."""
    groups = [group.name for resource in resources for group in resource.autoscaling_groups or [] if group.name]
    if len(groups) != 1:
        raise ValueError(f"a managed node group has one Auto Scaling group; EKS reported {groups}")
    return groups[0]
