"""The flows the cluster needs, derived once from the spec and the nodes (model/flows.py says
what a flow is). Each derived flow says why; a spec's `flows:` adds site-specific ones."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from ipaddress import IPv4Network, ip_address

from ClusterShell.NodeSet import NodeSetException

from gpunet.errors import DesignError, SpecProblem
from gpunet.model.flows import GPUNET_EXPORTER_PORT, NODE_EXPORTER_PORT, PROBE_PORT, Flow
from gpunet.model.nodeset import NodeSetError, fold, parse_nodeset
from gpunet.model.plan import Node
from gpunet.model.spec import EDGE_PLANES, FlowSpec, Spec
from gpunet.model.types import port_range

# Storage protocols a storage plane carries to storage servers: portmapper, NFS, NFS over RDMA, Lustre LNet.
STORAGE_SERVICES = (("portmapper", "tcp", "111"), ("portmapper", "udp", "111"), ("nfs", "tcp", "2049"),
                    ("nfs", "udp", "2049"), ("nfs-rdma", "tcp", "20049"), ("lustre", "tcp", "988"))


class Members:
    """The spec's nodes by role and group, and their addresses by plane."""

    def __init__(self, spec: Spec, nodes: Sequence[Node]) -> None:
        self.nodes = list(nodes)
        self.spec = spec
        self.names = [n.name for n in self.nodes]
        self._by_role: dict[str, list[str]] = {}
        for n in self.nodes:
            self._by_role.setdefault(n.role, []).append(n.name)
        # Each plane's addressed nodes once, in node order: every flow asks, and a 1M-GPU plan
        # has 125 000 nodes of a dozen interfaces each.
        self._addressed: dict[str, list[str]] = {}
        for n in self.nodes:
            for plane in dict.fromkeys(i.plane for i in n.interfaces if i.address):
                self._addressed.setdefault(plane, []).append(n.name)

    def role(self, *roles: str) -> list[str]:
        """The nodes of these roles, in node order."""
        if len(roles) == 1:
            return list(self._by_role.get(roles[0], ()))
        return [n.name for n in self.nodes if n.role in roles]

    def on(self, plane: str, names: list[str]) -> list[str]:
        """The names with an address on the plane (only they can send or receive there), in node order."""
        wanted = set(names)
        return [n for n in self._addressed.get(plane, ()) if n in wanted]

    def subnet(self, plane: str) -> str:
        return str(self.spec.planes[plane].subnet)  # type: ignore[index]  # a PlaneName, checked by the caller


def derive_flows(spec: Spec, nodes: Sequence[Node]) -> list[Flow]:
    """Every flow of the cluster, derived: SSH, scrapes, Slurm, job bootstrap, data planes, storage,
    NTP, DNS; then the spec's own."""
    members = Members(spec, nodes)
    _refuse_monitoring_on_a_node(members)
    derived = [*_ssh(members), *_exporters(members), *_slurm(members), *_bootstrap(members),
               *_data_planes(members), *_storage(members), *_probes(members), *_time_and_names(members)]
    return [f for f in derived if f is not None] + list(_declared(members))


def _declared(m: Members) -> Iterator[Flow]:
    problems = []
    for i, spec in enumerate(m.spec.flows):
        try:
            yield declared_flow(m, spec)
        except ValueError as exc:
            problems.append(SpecProblem(str(exc).removeprefix("Value error, "), ("flows", i),
                                        "from/to: @role:NAME, @group:NAME, all or a NodeSet of the plan's nodes"))
    if problems:
        raise DesignError(problems)


def _refuse_monitoring_on_a_node(m: Members) -> None:
    """The monitoring range is where Prometheus scrapes from: a node's own address inside it would
    both be scraped and be let in to scrape (the design assigns addresses from the bottom up)."""
    monitoring = m.spec.site.monitoring
    inside = [f"{n.name} ({i.address})" for n in m.nodes for i in n.interfaces
              if monitoring is not None and i.address and ip_address(i.address.split("/")[0]) in monitoring]
    if inside:
        raise DesignError([SpecProblem(f"monitoring {monitoring} holds the address of {', '.join(inside[:3])}",
                                       ("site", "monitoring"), "give the Prometheus host an address above the "
                                       "nodes' (e.g. the top of the management subnet)")])


def _flow(members: Members, what: tuple[str, str, str, str], sources: list[str], targets: list[str], why: str,
          **extra: object) -> Flow | None:
    """A flow between nodes, each side limited to the nodes with an address on the plane; None when
    a side has none (a plane only some roles use)."""
    service, protocol, ports, plane = what  # ("srun", "tcp", "60001-63000", "management")
    if plane not in members.spec.planes:
        return None
    senders, receivers = members.on(plane, sources), members.on(plane, targets)
    if not receivers or not (senders or extra):
        return None
    return Flow(service=service, protocol=protocol, ports=ports, plane=plane, from_nodes=fold(senders),
                to_nodes=fold(receivers), why=why, **extra)


def _ssh(m: Members) -> Iterator[Flow | None]:
    if "management" not in m.spec.planes:
        return
    site = m.spec.site
    bastion = [site.bastion] if site.bastion in m.names else []
    outside = {*bastion, *m.role("login")}
    inner = [n for n in m.names if n not in outside]
    subnets = [str(site.admin_subnet)] if site.admin_subnet else ([] if bastion else [m.subnet("management")])
    yield _flow(m, ("ssh", "tcp", "22", "management"), bastion, inner,
                "SSH from the admin range and through the bastion", from_subnets=tuple(subnets))
    yield _flow(m, ("ssh-in", "tcp", "22", "management"), [], [*bastion, *m.role("login")],
                "SSH to the login nodes and the bastion: the way in", from_anywhere=True)


def _exporters(m: Members) -> Iterator[Flow | None]:
    if m.spec.site.monitoring is None:
        return
    for service, port in (("node-exporter", NODE_EXPORTER_PORT), ("gpunet-exporter", GPUNET_EXPORTER_PORT)):
        yield _flow(m, (service, "tcp", str(port), "management"), [], m.names, "Prometheus scrapes from the "
                    "monitoring subnet", from_subnets=(str(m.spec.site.monitoring),))


def _slurm(m: Members) -> Iterator[Flow | None]:
    slurm = m.spec.site.scheduler
    if slurm is None:
        return
    workers, submitters = m.role("gpu"), m.role("gpu", "login")
    controller = [slurm.controller]
    yield _flow(m, ("slurmctld", "tcp", str(slurm.slurmctld_port), "management"), submitters, controller,
                "slurmd, srun and sbatch to the Slurm controller")
    yield _flow(m, ("slurmd", "tcp", str(slurm.slurmd_port), "management"), [*controller, *workers], workers,
                "the controller to slurmd, and slurmd to slurmd (message fan-out)")
    yield _flow(m, ("srun", "tcp", slurm.srun_ports, "management"), workers, submitters,
                "job steps to srun's listening ports (SrunPortRange)")


def bootstrap_plane(spec: Spec) -> str | None:
    """Where NCCL, MPI and PMIx bootstrap (NCCL_SOCKET_IFNAME): management when compute is RDMA
    (data goes over verbs), the compute plane itself when it is plain Ethernet (sockets carry it)."""
    compute = spec.planes.get("compute")
    if compute is None:
        return None
    return "compute" if compute.technology == "ethernet" else "management"


def _bootstrap(m: Members) -> Iterator[Flow | None]:
    plane = bootstrap_plane(m.spec)
    if plane is not None:
        gpus = m.role("gpu")
        yield _flow(m, ("job-bootstrap", "tcp", m.spec.site.ephemeral_ports, plane), gpus, gpus,
                    "NCCL, MPI and PMIx bootstrap between a job's nodes (ip_local_port_range)")


def _data_planes(m: Members) -> Iterator[Flow | None]:
    for plane in ("compute",):
        if plane in m.spec.planes:
            yield _flow(m, (f"{plane}-peers", "any", "", plane), [], m.names,
                        "compute plane peers: NCCL data, RDMA connection setup, any port",
                        from_subnets=(m.subnet(plane),))


def _storage(m: Members) -> Iterator[Flow | None]:
    if "storage" not in m.spec.planes:
        return
    servers = set(m.role("storage"))
    clients = m.on("storage", [n for n in m.names if n not in servers])
    for service, protocol, ports in STORAGE_SERVICES:
        yield _flow(m, (service, protocol, ports, "storage"), clients, m.role("storage"),
                    "storage clients to the storage servers")


def _probes(m: Members) -> Iterator[Flow | None]:
    """`gpunet localize` probes every equal-cost path of a routed plane node to node, and doctor
    probes the path MTU, on one UDP port: admitted from the plane's own nodes and nothing else, so
    a firewall never turns into the loss a probe would blame on a cable."""
    for plane, settings in m.spec.planes.items():
        if plane not in EDGE_PLANES and settings.technology != "infiniband":
            yield _flow(m, ("gpunet-probe", "udp", str(PROBE_PORT), plane), m.names, m.names,
                        "gpunet localize and doctor's path-MTU probes between the plane's nodes")


def _time_and_names(m: Members) -> Iterator[Flow | None]:
    site = m.spec.site
    senders = m.on("management", m.names)
    if site.ntp_servers and senders:
        yield Flow(service="ntp", protocol="udp", ports="123", plane="management", from_nodes=fold(senders),
                   to_hosts=site.ntp_servers, why="time from the site's NTP servers")
    for protocol in ("udp", "tcp"):
        if site.dns_servers and senders:
            yield Flow(service="dns", protocol=protocol, ports="53", plane="management", from_nodes=fold(senders),
                       to_hosts=site.dns_servers, why="name resolution from the site's DNS servers")


def declared_flow(m: Members, spec: FlowSpec) -> Flow:
    """A spec's own flow, its `from` and `to` resolved to the plan's nodes (or a subnet)."""
    if spec.plane not in m.spec.planes:
        raise ValueError(f"plane {spec.plane!r} is not a plane of the spec")
    subnets, sources = _source(m, spec.source)
    senders, receivers = m.on(spec.plane, sources), m.on(spec.plane, select(m, spec.to))
    for side, text, chosen in (("from", spec.source, senders or subnets), ("to", spec.to, receivers)):
        if not chosen:
            raise ValueError(f"{side} {text!r} names no node with an address on the {spec.plane} plane")
    return Flow(service=spec.service, protocol=spec.protocol, ports=spec.ports, plane=spec.plane,
                from_nodes=fold(senders), from_subnets=subnets, to_nodes=fold(receivers),
                why=spec.why or "declared in the spec", declared=True)


def _source(m: Members, text: str) -> tuple[tuple[str, ...], list[str]]:
    try:
        return (str(IPv4Network(text)),), []
    except ValueError:
        return (), select(m, text)


def select(m: Members, text: str) -> list[str]:
    """@role:NAME, @group:NAME, all, or a NodeSet of the plan's nodes; ValueError otherwise."""
    kind, _, name = text.removeprefix("@").partition(":")
    if text == "all":
        return m.names
    if text.startswith("@") and kind == "role":
        return m.role(name)
    if text.startswith("@") and kind == "group":
        return [n.name for n in m.nodes if n.group == name]
    try:
        chosen = set(parse_nodeset(text))
    except (NodeSetError, NodeSetException) as exc:
        raise ValueError(f"{text!r}: @role:NAME, @group:NAME, all, a NodeSet of the plan's nodes{_or_subnet(text)}; "
                         f"{exc}") from None
    return [n for n in m.names if n in chosen]


def _or_subnet(text: str) -> str:
    try:
        ip_address(text.split("/", maxsplit=1)[0])
        return " (a subnet with its prefix, e.g. 10.0.0.0/24)"
    except ValueError:
        return ""


def port_conflicts(spec: Spec) -> list[str]:
    """Ranges that would collide on a node: the ephemeral range over a listening port."""
    ephemeral = port_range(spec.site.ephemeral_ports)
    slurm = spec.site.scheduler
    listening = {"srun_ports": port_range(slurm.srun_ports), "slurmctld_port": port_range(str(slurm.slurmctld_port)),
                 "slurmd_port": port_range(str(slurm.slurmd_port))} if slurm else {}
    assert ephemeral is not None
    return [key for key, span in listening.items() if span is not None and span.overlaps(ephemeral)]
