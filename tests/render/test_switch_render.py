"""Switch renders (FRR, SONiC, NVUE) of every built-in example: every Ethernet and RoCE switch
renders; every frr.conf passes FRR's own parsers; every config_db.json holds together (always) and
validates against SONiC's YANG models with yanglint (GPUNET_SONIC_YANG); the RoCE class comes from
plane.qos alone; names never become extra lines."""

from __future__ import annotations

import json
import os
import re
import shlex
from functools import cache
from ipaddress import IPv4Interface
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpunet.design import design
from gpunet.errors import UsageError
from gpunet.model.plan import Plan
from gpunet.model.switching import ecmp_widths, sessions
from gpunet.render import render_all
from gpunet.render.switch import SWITCH_RENDERERS, render_switches
from gpunet.render.switch.frr import render_frr
from gpunet.render.switch.sonic import render_config_db, render_sonic_frr
from gpunet.spec.examples import EXAMPLES, example_text
from gpunet.spec.loader import parse_spec
from tests.render import validators as v
from tests.render.rendered import example_plan
from tests.render.sonic_yang import yanglint

SWITCH_TARGETS = list(SWITCH_RENDERERS)


def plan_of(example: str) -> Plan:
    return example_plan(example)  # designed once per process, shared with the other modules


@cache
def rendered(example: str) -> dict[str, str]:
    return render_switches(plan_of(example), SWITCH_TARGETS)


def files(suffix: str) -> list[tuple[str, str, str]]:
    return [(e, path, text) for e in EXAMPLES for path, text in rendered(e).items() if path.endswith(suffix)]


@pytest.mark.parametrize("example", list(EXAMPLES))
def test_every_ethernet_switch_renders_and_no_infiniband_one(example: str) -> None:
    plan = plan_of(example)
    ethernet = {s.name for s in plan.switches if next(p for p in plan.planes if p.name == s.plane).technology
                != "infiniband"}
    names = {path.split("/")[1] for path in rendered(example)}
    assert names == ethernet
    for switch in (s for s in plan.switches if s.name in ethernet):
        here = {path.split("/", 2)[2] for path in rendered(example) if path.split("/")[1] == switch.name}
        routed = next(p for p in plan.planes if p.name == switch.plane).routing is not None
        expected = {"etc/lldpd.d/gpunet.conf", "etc/sonic/config_db.json", "nvue.sh"}
        assert here == expected | ({"etc/frr/frr.conf", "etc/sonic/frr/frr.conf"} if routed else set())


def test_every_frr_conf_passes_frrs_parsers(tmp_path: Path) -> None:
    if v.need("/usr/lib/frr/bgpd"):
        pytest.skip(v.need("/usr/lib/frr/bgpd"))
    if os.geteuid() != 0:  # else a daemon's dry run fails before reading, with no '%' refusal to count
        pytest.skip("FRR's daemons drop to user frr before they read the file: needs root")
    confs = files("frr.conf")
    assert len(confs) >= 80  # both variants of every routed switch of every example
    for example, path, text in confs:
        assert v.frr_check(text) == [], (example, path)


def test_frr_parser_check_catches_a_broken_file(tmp_path: Path) -> None:
    if v.need("/usr/lib/frr/bgpd"):
        pytest.skip(v.need("/usr/lib/frr/bgpd"))
    if os.geteuid() != 0:  # else a daemon's dry run fails before reading, with no '%' refusal to count
        pytest.skip("FRR's daemons drop to user frr before they read the file: needs root")
    text = files("etc/frr/frr.conf")[0][2]
    # bgpd refuses a member overriding its group's remote-as; vtysh's syntax check cannot tell
    semantic = (" neighbor FABRIC peer-group\n neighbor FABRIC remote-as external\n"
                " neighbor 10.9.9.9 peer-group FABRIC\n neighbor 10.9.9.9 remote-as 5")
    assert any(p.startswith("bgpd: %") for p in v.frr_check(text.replace(" neighbor FABRIC peer-group",
                                                                                   semantic)))
    assert v.frr_check(re.sub(r"maximum-paths \d+", "maximum-paths 300", text))  # above the build's 256


def test_options_unnumbered_and_bfd_render_and_parse(tmp_path: Path) -> None:
    text = example_text("small-ethernet").replace("      style: spine-leaf\n", "      style: spine-leaf\n", 1)
    data = yaml.safe_load(text)
    data["planes"]["compute"]["routing"] = {"peering": "unnumbered", "bfd": True}
    plan = design(parse_spec(yaml.safe_dump(data))[0])
    leaf = next(s for s in plan.switches if s.name == "comp-leaf001")
    conf = render_frr(plan, leaf)
    assert " neighbor swp17 interface remote-as 4210000000" in conf and " neighbor FABRIC bfd" in conf
    assert " neighbor FABRIC capability extended-nexthop" in conf and "/31" not in conf
    if not v.need("/usr/lib/frr/bgpd"):
        assert v.frr_check(conf) == []
        assert v.frr_check(render_sonic_frr(plan, leaf)) == []


def test_sessions_and_maximum_paths_follow_the_plan() -> None:
    """A session per switch-to-switch cable, each neighbour's planned ASN; maximum-paths covers the
    widest ECMP toward every leaf (at least the spine count on a leaf)."""
    plan = plan_of("small-ethernet")
    for switch in (s for s in plan.switches if s.plane == "storage"):
        conf = rendered("small-ethernet")[f"switches/{switch.name}/etc/frr/frr.conf"]
        planned = sessions(plan, switch)
        assert len(planned) == sum(1 for c in plan.links_at[switch.name] if c.tier == "leaf_spine") > 0
        for s in planned:
            assert f" neighbor {s.peer_address} remote-as {s.peer_asn}" in conf
        paths = int(conf.split("maximum-paths ")[1].split()[0])
        assert paths >= max(ecmp_widths(plan, switch).values(), default=1)
        if switch.tier == "leaf":
            assert paths >= sum(1 for s in plan.switches if s.plane == "storage" and s.tier == "spine")
        assert " timers bgp 3 9" in conf and "timers connect 5" in conf and "multipath-relax" in conf


def test_a_leaf_announces_its_hosts_and_loopback() -> None:
    plan = plan_of("scalable-unit")
    leaf = next(s for s in plan.switches if s.name == "stor-leaf001")
    conf = rendered("scalable-unit")["switches/stor-leaf001/etc/frr/frr.conf"]
    hosts = [n for n in plan.nodes if any(c.b.device == leaf.name for c in plan.links_at.get(n.name, ()))]
    bonds = [i.address for n in hosts for i in n.interfaces if i.plane == "storage" and i.address]
    assert bonds and all(f"  network {IPv4Interface(a).ip}/32" in conf for a in bonds)
    assert f"  network {leaf.loopback}/32" in conf and "ip route " in conf and " bond1\n" in conf + "\n"


# --- SONiC ----------------------------------------------------------------------------------------

def test_config_db_holds_together() -> None:
    """What needs no models: every value a string (or a list of strings), every key of a referencing
    table names an existing PORT, every map and scheduler a port uses exists, every BGP session's
    local address is an INTERFACE prefix of this switch, MTU 9216 and admin up on every port."""
    for example, path, text in files("config_db.json"):
        db = json.loads(text)
        assert_strings(db, (example, path))
        ports = set(db["PORT"])
        assert all(p["mtu"] == "9216" and p["admin_status"] == "up" and p["description"] for p in db["PORT"].values())
        for table in ("PORT_QOS_MAP", "PFC_WD", "INTERFACE", "QUEUE", "PORTCHANNEL_MEMBER", "VLAN_MEMBER"):
            names = {key.split("|")[1] if table in ("PORTCHANNEL_MEMBER", "VLAN_MEMBER") else key.split("|")[0]
                     for key in db.get(table, {})} - {"GLOBAL"}
            assert names <= ports, (example, path, table, names - ports)
        for mapping in db.get("PORT_QOS_MAP", {}).values():
            assert all(mapping[m] in db[t] for m, t in (("dscp_to_tc_map", "DSCP_TO_TC_MAP"),
                                                         ("tc_to_queue_map", "TC_TO_QUEUE_MAP"),
                                                         ("tc_to_pg_map", "TC_TO_PRIORITY_GROUP_MAP")))
        assert all(q["scheduler"] in db["SCHEDULER"] for q in db.get("QUEUE", {}).values())
        own = {key.split("|")[1].split("/")[0] for key in db.get("INTERFACE", {}) if "|" in key}
        assert all(n["local_addr"] in own for n in db.get("BGP_NEIGHBOR", {}).values())


def assert_strings(value: Any, where: tuple[str, str]) -> None:
    if isinstance(value, dict):
        for item in value.values():
            assert_strings(item, where)
    elif isinstance(value, list):
        assert all(isinstance(i, str) for i in value), where
    else:
        assert isinstance(value, str), (where, value)


def sonic_models() -> Path | None:
    found = os.environ.get("GPUNET_SONIC_YANG")
    return Path(found) if found and Path(found, "sonic-port.yang").is_file() else None


def test_every_config_db_validates_against_sonic_yang(tmp_path: Path) -> None:
    """SONiC's own YANG models (sonic-yang-models, sonic-net/sonic-buildimage) through libyang."""
    models = sonic_models()
    if models is None:
        pytest.skip("GPUNET_SONIC_YANG does not name a directory of sonic-yang-models (sonic-port.yang ...): "
                    "SONiC's models are not part of this repository")
    if v.need("yanglint"):
        pytest.skip(v.need("yanglint"))
    for example, path, text in files("config_db.json"):
        done = yanglint(models, json.loads(text), tmp_path)
        assert done.returncode == 0, (example, path, done.stderr[-2000:])
        assert "check skipped" not in done.stderr, done.stderr[-2000:]  # every must/when ran


def test_yanglint_refuses_a_broken_config_db(tmp_path: Path) -> None:
    models = sonic_models()
    if models is None or v.need("yanglint"):
        pytest.skip("GPUNET_SONIC_YANG or yanglint missing")
    db = json.loads(rendered("scalable-unit")["switches/stor-leaf001/etc/sonic/config_db.json"])
    db["PORT"]["Ethernet0"]["mtu"] = "9300"
    db["QUEUE"]["Ethernet0|3"]["scheduler"] = "nowhere"
    done = yanglint(models, db, tmp_path)
    assert done.returncode != 0 and ("mtu" in done.stderr or "scheduler" in done.stderr.lower())


# --- QoS from plane.qos alone ----------------------------------------------------------------------

def test_every_render_follows_plane_qos() -> None:
    """Another RoCE class in the spec: SONiC's maps, PFC and WRED, NVUE's commands and the hosts'
    NCCL traffic class all move with it."""
    data = yaml.safe_load(example_text("scalable-unit"))
    data["planes"]["storage"]["qos"] = {"dscp": 24, "priority": 4, "cnp_dscp": 46, "cnp_priority": 5, "ecn": False}
    plan = design(parse_spec(yaml.safe_dump(data))[0])
    leaf = next(s for s in plan.switches if s.name == "stor-leaf001")
    db = json.loads(render_config_db(plan, leaf))
    assert db["DSCP_TO_TC_MAP"]["GPUNET"]["24"] == "4" and db["DSCP_TO_TC_MAP"]["GPUNET"]["46"] == "5"
    assert db["DSCP_TO_TC_MAP"]["GPUNET"]["26"] == "0"
    assert {m["pfc_enable"] for m in db["PORT_QOS_MAP"].values()} == {"4"}
    assert db["QUEUE"]["Ethernet0|5"]["scheduler"] == "gpunet_cnp" and "WRED_PROFILE" not in db
    assert "wred_profile" not in db["QUEUE"]["Ethernet0|4"]
    nvue = render_switches(plan, ["nvue"])["switches/stor-leaf001/nvue.sh"]
    for line in ("nv set qos pfc default-global switch-priority 4",
                 "nv set qos mapping default-global dscp 24 switch-priority 4",
                 "nv set qos mapping default-global dscp 46 switch-priority 5",
                 "nv set qos egress-queue-mapping default-global switch-priority 4 traffic-class 3",
                 "nv set qos congestion-control default-global traffic-class 3 ecn disable"):
        assert line in nvue.splitlines(), line
    roce = yaml.safe_load(example_text("small-ethernet"))  # the hosts' side: a RoCE compute plane
    roce["planes"]["compute"] |= {"technology": "roce", "qos": data["planes"]["storage"]["qos"]}
    hosts = design(parse_spec(yaml.safe_dump(roce))[0])
    nccl = render_all(hosts, [hosts.nodes[0]], ["nccl"])["nodes/node01/etc/gpunet/nccl.env"]
    assert "NCCL_IB_TC=96" in nccl  # 24 << 2, ECN off


def test_default_class_is_nvues_profile_and_sonics_maps() -> None:
    text = rendered("scalable-unit")["switches/stor-leaf001/nvue.sh"]
    assert "nv set qos roce mode lossless" in text and "qos mapping" not in text and "qos pfc" not in text
    db = json.loads(rendered("scalable-unit")["switches/stor-leaf001/etc/sonic/config_db.json"])
    assert db["DSCP_TO_TC_MAP"]["GPUNET"]["26"] == "3" and db["WRED_PROFILE"]["GPUNET_LOSSLESS"]["ecn"] == "ecn_all"


# --- NVUE -------------------------------------------------------------------------------------------

def test_nvue_scripts_are_nv_commands_only() -> None:
    for example, path, text in files("nvue.sh"):
        lines = text.splitlines()
        assert lines[0] == "#!/bin/sh" and lines[-1] == "nv config apply -y", (example, path)
        for line in lines[1:-1]:
            if line.startswith("#") or line == "set -e":
                continue
            words = shlex.split(line)
            assert words[:2] == ["nv", "set"] and len(words) >= 3, (example, path, line)
        done = v.run("sh", "-n", stdin=text)
        assert done.returncode == 0, done.stderr


# --- hostile names ------------------------------------------------------------------------------------

def test_a_line_break_in_a_name_is_refused_not_rendered() -> None:
    """Names reach renders constrained (a plan.json is validated like a spec); this is the last line:
    a far end holding a line break (a plan built past validation) is refused by every switch render."""
    plan = plan_of("small-ethernet")
    node = plan.nodes[0]
    cable = next(c for c in plan.links if c.a.device == node.name and c.plane == "storage")
    evil = cable.model_copy(update={"a": cable.a.model_copy(update={"port": "ens2f0\nrouter bgp 1"})})
    broken = plan.model_copy(update={"links": tuple(evil if c is cable else c for c in plan.links)})
    leaf = next(s for s in broken.switches if s.name == cable.b.device)
    for render in (render_frr, render_config_db, lambda p, s: render_switches(p, ["nvue", "frr"])):
        with pytest.raises(UsageError, match="line break"):
            render(broken, leaf)
