"""Pass 2 rules for the GCP context, the network and the cluster."""

from __future__ import annotations

import ipaddress
from typing import Any

import yaml
from pydantic.alias_generators import to_camel

from ..cluster.kubeconfig import kubeconfig_credentials
from ..cluster.maintenance import check_maintenance
from ..cluster.model import AuthorizedNetworkConfig, ClusterConfig, SystemPoolConfig
from ..cluster.rules import (
    check_nodes,
    check_private_nodes,
    check_public_endpoint_networks,
    check_ranges,
)
from ..core.common import (
    K8S_NAME,
    KUBECONFIG_CHECK_LIMIT,
    LABEL_VALUE_PATTERN,
    MIN_SUBNET_PREFIX,
    POD_RANGE_PREFIX_PER_NODE,
    PRIVATE_RANGES,
    PROJECT_PATTERN,
    ZONE_PATTERN,
    KeyNames,
    cut,
    listing,
    network_of,
)
from ..gpu.pool import GpuPool
from ..network.model import NetworkConfig
from .schema import RuleBase, dashboard_on

# The stack whose cluster must enforce Binary Authorization unless told otherwise.
PROD_STACK = "prod"


class ClusterRules(RuleBase):
    def _zone_example(self) -> str:
        """A zone of the stack's region, for a message: one the catalog lists, else the form."""
        zones = sorted(
            {z for a in self.catalog.accelerators.values() for z in a.zones.get(self.region or "", ())}
        )
        return (
            f"one of its zones such as {zones[0]}" if zones else f"one of its zones ({self.region}-<letter>)"
        )

    def _no_network(self) -> None:
        if self.config.network is not None:
            self.problems.add(
                f"{self.root}network",
                "not allowed with cluster.mode existing: no network is declared for an existing cluster",
            )
        return None

    def _network(self) -> NetworkConfig:
        net = self.config.network or NetworkConfig()
        if net.existing is not None:
            cidr_keys = {"subnet_cidr", "pods_cidr", "services_cidr"} & net.model_fields_set
            for key in sorted(cidr_keys):
                self.problems.add(
                    f"{self.root}network.{to_camel(key)}",
                    "not allowed with network.existing: the existing subnet's ranges are used",
                )
            if "flow_log_sampling" in net.model_fields_set:
                self.problems.add(
                    f"{self.root}network.flowLogSampling",
                    "not allowed with network.existing: flow logs are a setting of the existing subnet",
                )
            return net
        # The ranges' own rules are GkeNetwork's (cluster/rules.py); their place in the VPC is the stack's.
        names = KeyNames(f"{self.root}network", camel=True)
        ranges = [(key, getattr(net, key)) for key in ("subnet_cidr", "pods_cidr", "services_cidr")]
        for key, value in check_ranges(ranges, names, self.problems).items():
            if value and not any(value.subnet_of(r) for r in PRIVATE_RANGES):
                self.warnings.append(
                    f"{names.at(key)}: {value} is outside RFC 1918 and 100.64.0.0/10; GKE accepts "
                    "privately used public ranges, but make sure nothing else routes them"
                )
        return net

    def _check_address_capacity(
        self, network: NetworkConfig, cluster: ClusterConfig, pools: tuple[GpuPool, ...]
    ) -> None:
        """The subnet must hold an address, and the Pod range a /24, for every node the pools can grow
        to (plus a surge node)."""
        if network.existing is not None or cluster.system_pool is None:
            return  # an existing subnet's ranges are not known here
        try:
            subnet = ipaddress.IPv4Network(network.subnet_cidr)
            pods = ipaddress.IPv4Network(network.pods_cidr)
        except ValueError:
            return  # a malformed range is reported where it is read; capacity needs both
        nodes = cluster.system_pool.max_nodes + sum(p.max_nodes or 0 for p in pools) + 1
        # Compute Engine reserves four addresses of every primary range.
        usable = subnet.num_addresses - 4
        if subnet.prefixlen <= MIN_SUBNET_PREFIX and usable < nodes:
            self.problems.add(
                f"{self.root}network.subnetCidr",
                f"{subnet} has {usable} node addresses, but the pools can grow to {nodes} nodes (system "
                "and GPU maxNodes, plus one upgrade surge node); use a "
                f"/{32 - (nodes + 3).bit_length()} or larger",
            )
        if pods.prefixlen > POD_RANGE_PREFIX_PER_NODE:
            return  # already reported
        capacity = 2 ** (POD_RANGE_PREFIX_PER_NODE - pods.prefixlen)
        if capacity < nodes:
            self.problems.add(
                f"{self.root}network.podsCidr",
                f"{pods} holds Pod addresses for {capacity} node(s), but the pools can grow to {nodes} "
                "(system and GPU maxNodes, plus one upgrade surge node; each node takes a /24); use a "
                f"/{POD_RANGE_PREFIX_PER_NODE - (nodes - 1).bit_length()} or larger",
            )

    # -- cluster ----------------------------------------------------------------------------------

    def _cluster(self) -> ClusterConfig:
        c = self.config.cluster
        prefix = f"{self.root}cluster"
        if c.mode == "existing":
            return self._existing_cluster(c, prefix)
        for key in ("kubeconfig", "context", "flavor"):
            if key in c.model_fields_set:
                self.problems.add(f"{prefix}.{key}", f"only allowed with mode existing (mode is {c.mode})")

        name = c.name or f"{self.project}-{self.stack}"
        project_ok = bool(self.project and PROJECT_PATTERN.fullmatch(self.project))
        name_known = "name" not in self.broken.cluster_keys
        if name_known and (c.name or project_ok) and not (K8S_NAME.fullmatch(name) and len(name) <= 40):
            key = "name" if c.name else "name (default <project>-<stack>)"
            self.problems.add(
                f"{prefix}.{key}",
                f"{cut(name)} is not a valid GKE cluster name; use at most 40 lowercase letters, digits "
                "and hyphens, starting with a letter",
            )

        location = c.location or self.region or ""
        if c.location and self.region_ok:
            zone = ZONE_PATTERN.fullmatch(c.location)
            if c.location == self.region:
                pass
            elif zone and zone.group(1) == self.region:
                if c.mode == "autopilot":
                    self.problems.add(
                        f"{prefix}.location",
                        f"{cut(c.location)} is a zone; Autopilot clusters are regional, so use "
                        f"{cut(self.region)} or leave location out",
                    )
            else:
                self.problems.add(
                    f"{prefix}.location",
                    f"{cut(c.location)} is not allowed: it is not region {self.region} or one of its "
                    f"zones; allowed: {self.region} (a regional cluster) or {self._zone_example()}",
                )
                # The pools are judged in the region: a zone of another region says nothing of them.
                location = self.region or ""
                self.broken.cluster_keys.add("location")

        authorized: list[AuthorizedNetworkConfig] = []
        for i, entry in enumerate(c.authorized_networks):
            path = f"{prefix}.masterAuthorizedNetworks[{i}].cidrBlock"
            net = network_of(entry.cidr_block, path, self.problems)
            if net is not None:
                authorized.append(
                    entry.model_copy(update={"display_name": entry.display_name or entry.cidr_block})
                )
        # GkeCluster's own rules (cluster/rules.py), named as the stack file writes them.
        names = KeyNames(prefix, camel=True)
        check_private_nodes(
            names, self.problems, private_nodes=c.private_nodes, public_endpoint=c.public_endpoint
        )
        if c.kubeconfig_endpoint == "ip" and not c.public_endpoint:
            self.warnings.append(
                f"{prefix}.kubeconfigEndpoint: ip with a private IP endpoint: `pulumi up` reaches the "
                "cluster only from inside its VPC (docs/configuration.md, 'Upgrading an existing stack')"
            )
        self._check_hardening(c, prefix)
        endpoint_keys = {"publicEndpoint", "publicEndpointOpenToInternet", "masterAuthorizedNetworks"}
        if not endpoint_keys & self.broken.cluster_keys:
            self._check_endpoint(c, authorized, prefix)

        check_nodes(
            names,
            self.problems,
            autopilot=c.autopilot,
            autopilot_key="mode autopilot",
            location=location,
            system_pool=c.system_pool,
            intranode_visibility_set="intranode_visibility" in c.model_fields_set,
            gpu_series=self.catalog.gpu_series,
        )
        check_maintenance(names, self.problems, c.maintenance)
        system_pool = None if c.autopilot else (c.system_pool or SystemPoolConfig())

        # The same type, resolved: the name, the location, display names and the system pool.
        return c.model_copy(
            update={
                "name": name,
                "location": location,
                "authorized_networks": authorized,
                "system_pool": system_pool,
            }
        )

    def _check_hardening(self, c: ClusterConfig, prefix: str) -> None:
        """Binary Authorization stays on in a stack named prod unless turned off on purpose; a DNS
        endpoint closed to the internet is reached only from Google Cloud (docs/security.md)."""
        acknowledged = c.binary_authorization_off_acknowledged
        if self.stack == PROD_STACK and not c.binary_authorization and not acknowledged:
            self.problems.add(
                f"{prefix}.binaryAuthorization",
                f"{'false' if 'binary_authorization' in c.model_fields_set else 'unset (false)'} in "
                "stack prod: enforce the project's Binary Authorization policy (binaryAuthorization: "
                "true), or set binaryAuthorizationOffAcknowledged: true to run prod without it",
            )
        elif acknowledged and c.binary_authorization:
            self.problems.add(
                f"{prefix}.binaryAuthorizationOffAcknowledged",
                "true contradicts binaryAuthorization: true; remove one",
            )
        if not c.dns_endpoint_external:
            self.warnings.append(
                f"{prefix}.dnsEndpointExternal: false: the DNS endpoint answers only requests from "
                "Google Cloud's networks, so `pulumi up` and kubectl must run there (docs/security.md)"
            )

    def _check_endpoint(
        self, c: ClusterConfig, authorized: list[AuthorizedNetworkConfig], prefix: str
    ) -> None:
        """The IP endpoint is private by default; a public one must be restricted unless meant open."""
        anywhere = [n.cidr_block for n in authorized if n.cidr_block.endswith("/0")]
        open_key = f"{prefix}.publicEndpointOpenToInternet"
        if not c.public_endpoint:
            if "public_endpoint_open_to_internet" in c.model_fields_set:
                self.problems.add(
                    open_key, "only allowed with publicEndpoint: true (the IP endpoint is private)"
                )
            if anywhere:
                self.problems.add(
                    f"{prefix}.masterAuthorizedNetworks",
                    f"{anywhere[0]} authorizes every address; list the networks that need the endpoint",
                )
            return
        check_public_endpoint_networks(len(authorized), f"{prefix}.masterAuthorizedNetworks", self.problems)
        wide_open = not authorized or bool(anywhere)
        if c.public_endpoint_open_to_internet:
            if not wide_open:
                self.problems.add(
                    open_key,
                    "true contradicts masterAuthorizedNetworks, which restricts the endpoint; remove one",
                )
            else:
                self.warnings.append(
                    f"{prefix}.publicEndpoint: the control plane's public IP endpoint accepts connections "
                    "from any address (authentication is still required); see docs/configuration.md, 'Access'"
                )
        elif wide_open:
            what = (
                f"{anywhere[0]} in masterAuthorizedNetworks"
                if anywhere
                else "an empty masterAuthorizedNetworks"
            )
            self.problems.add(
                f"{prefix}.publicEndpoint",
                f"true with {what} opens the control plane to any address; list the networks that need "
                "it, use the DNS endpoint instead (publicEndpoint: false), or set "
                "publicEndpointOpenToInternet: true to mean it",
            )

    def _existing_cluster(self, c: ClusterConfig, prefix: str) -> ClusterConfig:
        gke_only = (
            "location",
            "release_channel",
            "private_nodes",
            "authorized_networks",
            "deletion_protection",
            "system_pool",
            "public_endpoint",
            "public_endpoint_open_to_internet",
            "binary_authorization",
            "binary_authorization_off_acknowledged",
            "intranode_visibility",
            "kubeconfig_endpoint",
            "minimum_version",
            "maintenance",
            "dns_endpoint_external",
            "secrets_encryption_key",
            "rbac_security_group",
            "hpa_profile",
            "auto_monitoring",
        )
        if c.name is not None and c.flavor is not None:
            # The name is pasted into Monitoring filters and PromQL: it must be a plain name.
            gke = c.flavor != "generic"
            pattern, most = (K8S_NAME, 40) if gke else (LABEL_VALUE_PATTERN, 63)
            if not c.name or len(c.name) > most or not pattern.fullmatch(c.name):
                kind = (
                    "a GKE cluster name (lowercase letters, digits and hyphens, starting with a letter"
                    if gke
                    else "a cluster label value (letters, digits, '-', '_' and '.'"
                )
                self.problems.add(f"{prefix}.name", f"{cut(c.name)} is not {kind}, at most {most})")
        for key in gke_only:
            if key in c.model_fields_set:
                self.problems.add(
                    f"{prefix}.{ClusterConfig.model_fields[key].alias}",
                    "not allowed with mode existing: the program does not manage that cluster",
                )
        if not c.kubeconfig and "kubeconfig" not in self.broken.cluster_keys:
            self.problems.add(
                f"{prefix}.kubeconfig",
                "required with mode existing; set it as a secret: "
                '`pulumi config set --secret --path gke-gpu:cluster.kubeconfig "$(cat kubeconfig)"`',
            )
        if c.flavor is None and "flavor" not in self.broken.cluster_keys:
            self.problems.add(f"{prefix}.flavor", "required with mode existing; allowed: 'gke', 'generic'")
        self._check_kubeconfig(c, prefix)
        name = c.name or ""
        monitoring = self.config.monitoring
        monitoring_known = c.flavor is not None and "monitoring" not in self.broken.sections
        name_known = "name" not in self.broken.cluster_keys
        if (
            name_known
            and monitoring_known
            and (dashboard_on(self.config) or monitoring.alerts.enabled)
            and not name
        ):
            self.problems.add(
                f"{prefix}.name",
                "required when monitoring.dashboard or monitoring.alerts is on: the dashboard and "
                "alerts filter on the cluster name",
            )
        return c.model_copy(update={"name": name, "location": "", "deletion_protection": False})

    def _check_kubeconfig(self, c: ClusterConfig, prefix: str) -> None:
        """A kubeconfig in plain text must hold no credential, and one that parses must have the named
        context (a secret not decrypted offline, or one that is not YAML, is left for the Kubernetes
        provider to judge)."""
        if not c.kubeconfig:
            return
        if len(c.kubeconfig) > KUBECONFIG_CHECK_LIMIT:  # parsing this much is slow: not read here
            self._check_kubeconfig_secret(prefix, None, f"over {KUBECONFIG_CHECK_LIMIT // 1024} KiB")
            return
        try:
            documents = list(yaml.safe_load_all(c.kubeconfig))
        except (yaml.YAMLError, RecursionError, ValueError):
            self._check_kubeconfig_secret(prefix, None, "not YAML")
            return
        self._check_kubeconfig_secret(prefix, documents)
        if len(documents) != 1 or not isinstance(documents[0], dict):
            return
        document = documents[0]
        entries = document.get("contexts")
        entries = entries if isinstance(entries, list) else []
        # Only string names count: an alias-expanded structure is not a context name.
        contexts = [
            ctx["name"] for ctx in entries if isinstance(ctx, dict) and isinstance(ctx.get("name"), str)
        ]
        if not contexts:
            self.problems.add(f"{prefix}.kubeconfig", "has no contexts; is it a kubeconfig file?")
        elif c.context is not None and c.context not in contexts:
            self.problems.add(
                f"{prefix}.context",
                f"{cut(c.context)} is not a context of the kubeconfig; allowed: {listing(contexts)}",
            )

    def _check_kubeconfig_secret(self, prefix: str, documents: list[Any] | None, unread: str = "") -> None:
        """A kubeconfig that holds a credential in any of its YAML documents must come from a secret
        (`secure:` in the stack file): in plain text it would sit in the repository and in every
        `pulumi preview` log. One that cannot be read (`documents` None; `unread` says why) cannot be
        cleared, so it must be a secret too."""
        if self.secret_keys is None or f"{self.root}cluster" in self.secret_keys:
            return  # not known (a caller without the engine's config) or stored as a secret
        store = (
            "store the kubeconfig as a secret: "
            '`pulumi config set --secret --path gke-gpu:cluster.kubeconfig "$(cat kubeconfig)"`'
        )
        if documents is None:
            self.problems.add(
                f"{prefix}.kubeconfig",
                f"is in plain text and {unread}, so it could not be checked for credentials; {store}",
            )
            return
        found = list(
            dict.fromkeys(
                path for doc in documents if isinstance(doc, dict) for path in kubeconfig_credentials(doc)
            )
        )
        if found:
            self.problems.add(
                f"{prefix}.kubeconfig",
                f"holds a credential in plain text ({listing(found, most=3)}); {store}",
            )

    # -- GPU pools --------------------------------------------------------------------------------
