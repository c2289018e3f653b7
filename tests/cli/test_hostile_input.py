"""The adversarial review's reproductions (issue 11), through the command line as a user runs it.
Each test is one item of the review; it imports nothing but the CLI, so the same file runs
against an older gpunet (PYTHONPATH) to show it failing there. Root-only items are in
tests/lab/test_lab_hostile.py."""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.zygote import run_gpunet

pytestmark = pytest.mark.spread  # independent tests: any free worker takes each (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
BAD_SPECS = REPO / "tests" / "fixtures" / "bad_specs"
EXAMPLES = REPO / "src" / "gpunet" / "spec" / "examples"
# ClusterShell's default groups.conf: the `local` source pastes the group name into a shell command.
GROUPS_CONF = """\
[Main]
default: local

[local]
map: [ -f $CFGDIR/groups ] && f=$CFGDIR/groups || f=$CFGDIR/groups.d/local.cfg; sed -n 's/^$GROUP:\\(.*\\)/\\1/p' $f
"""


def gpunet(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`python -m gpunet ARGS` as a user runs it (a fresh process: environment, cwd, exit status),
    forked from a started interpreter (tests/zygote.py: this module runs gpunet about 130 times)."""
    return run_gpunet(list(args), cwd=cwd, env=os.environ | (env or {}), timeout=timeout)


def refused(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Exit 2 with a one-line message naming the problem, never a traceback."""
    assert done.returncode == 2, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr + done.stdout
    for needle in needles:
        assert needle in done.stderr, done.stderr


@pytest.fixture(scope="module")
def plan_dict(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The small-ethernet example's plan.json (bastion login01, an admin range, 43 nodes)."""
    out = tmp_path_factory.mktemp("plan")
    assert gpunet("plan", str(EXAMPLES / "small-ethernet.yaml"), "-o", str(out)).returncode == 0
    data: dict[str, Any] = json.loads((out / "plan.json").read_text())
    return data


def write_plan(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    return path


def no_files_under(root: Path) -> bool:
    return not root.exists() or not [p for p in root.rglob("*") if p.is_file()]


# 1. validate ran a shell command from a spec's NodeSet -------------------------------------------

HOSTILE_GROUP = "@x'$(touch F)'"


@pytest.mark.parametrize(("args", "needle"), [
    (["validate", str(BAD_SPECS / "nodeset-group-runs-a-command" / "spec.yaml")], "@groups are not available here"),
    (["fleet", "run", HOSTILE_GROUP, "--", "true"], "@groups are not available here"),
    (["render", "--node", HOSTILE_GROUP, "-o", "out"], "names no node"),  # the plan's own groups only
])
def test_1_a_group_name_runs_no_command(tmp_path: Path, args: list[str], needle: str) -> None:
    """With ClusterShell's default groups.conf in place (CLUSTERSHELL_CFGDIR), where the upcall runs."""
    (tmp_path / "groups.conf").write_text(GROUPS_CONF)
    refused(gpunet(*args, cwd=tmp_path, env={"CLUSTERSHELL_CFGDIR": str(tmp_path)}), needle)
    assert not (tmp_path / "F").exists()


# 2. a newline in site.bastion or site.domain became lines of ssh_config, /etc/hosts, keyfiles ---

@pytest.mark.parametrize("case", ["bastion-newline-proxycommand", "domain-newline-hosts-line"])
def test_2_a_newline_in_bastion_or_domain_is_refused_before_rendering(tmp_path: Path, case: str) -> None:
    done = gpunet("render", str(BAD_SPECS / case / "spec.yaml"), "-o", str(tmp_path / "out"))
    refused(done, "is not a DNS name")
    assert no_files_under(tmp_path / "out")


# 3. plan.json text reached commands and shell files unchecked -------------------------------------

def _mutated(plan: dict[str, Any], where: str, value: str) -> dict[str, Any]:
    data = json.loads(json.dumps(plan))
    node = next(n for n in data["nodes"] if n["name"] == "node01")
    if where == "switch":
        data["switches"][0]["name"] += value
    elif where == "management address":
        node["interfaces"][0]["address"] = value
    elif where == "hca":
        node["interfaces"][0]["hca"] = value
    elif where == "hostname":
        node["interfaces"][0]["hostname"] += value
    return data


@pytest.mark.parametrize(("where", "value", "path"), [
    ("switch", "\nlink add gnevil type dummy", "switches.0.name"),
    ("management address", "-oProxyCommand=touch F", "nodes.0.interfaces.0.address"),
    ("hca", "mlx5_0$(touch F)", "nodes.0.interfaces.0.hca"),
    ("management address", "-V/24", "nodes.0.interfaces.0.address"),
    ("hostname", "\n198.18.0.99 evil", "nodes.0.interfaces.0.hostname"),
])
def test_3_a_hostile_plan_json_is_refused_where_it_is_read(tmp_path: Path, plan_dict: dict[str, Any], where: str,
                                                           value: str, path: str) -> None:
    plan = write_plan(tmp_path, _mutated(plan_dict, where, value))
    for args in (["render", str(plan), "-o", str(tmp_path / "out")],
                 ["fleet", "run", "node01", "--plan", str(plan), "--timeout", "5", "--", "true"],
                 ["doctor", "--plan", str(plan), "--node", "node02", "--interval", "0"]):
        done = gpunet(*args, cwd=tmp_path)
        refused(done, "not a valid plan", path)
    assert not (tmp_path / "F").exists() and no_files_under(tmp_path / "out")


# 4. fleet run: names not checked against the lab's servers; a node name as an ssh option ----------

def test_4_a_shell_command_as_a_lab_node_name_runs_nothing(tmp_path: Path, plan_dict: dict[str, Any]) -> None:
    (tmp_path / "labs" / "q").mkdir(parents=True)
    write_plan(tmp_path / "labs" / "q", plan_dict)
    done = gpunet("fleet", "run", "x;touch F;#", "--lab", "q", "--", "true", cwd=tmp_path,
                  env={"GPUNET_LAB_ROOT": str(tmp_path / "labs")})
    refused(done, "not a valid hostname")
    assert not (tmp_path / "F").exists()


def test_4_a_node_name_never_becomes_an_ssh_option(tmp_path: Path) -> None:
    done = gpunet("fleet", "run", "--timeout", "5", "--", "-oProxyCommand=touch F", "true", cwd=tmp_path)
    refused(done, "not a valid hostname")
    assert not (tmp_path / "F").exists()


# 5. resource bombs (time and memory are printed by benchmarks/input_limits.py) --------------------

def _alias_bomb(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_5_an_alias_bomb_is_refused_at_its_limit(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(_alias_bomb())
    refused(gpunet("validate", str(tmp_path / "bomb.yaml"), timeout=30), "bomb.yaml:", "expands to more than")
    refused(gpunet("bench", "compare", "1", "2", "--db", str(tmp_path / "x.sqlite"), "--rules",
                   str(tmp_path / "bomb.yaml"), timeout=30), "expands to more than")


def test_5_ten_million_nodes_are_refused_at_the_limit(tmp_path: Path) -> None:
    refused(gpunet("validate", str(BAD_SPECS / "nodeset-ten-million-nodes" / "spec.yaml"), timeout=30),
            "limit of 1000000 nodes")
    refused(gpunet("fleet", "run", "node[1-10000000]", "--", "true", timeout=30), "limit of 1000000 nodes")


def test_5_a_50_mb_spec_is_refused_before_it_is_read(tmp_path: Path) -> None:
    with (tmp_path / "big.yaml").open("w") as handle:
        handle.writelines(["# " + "x" * 77 + "\n"] * (50 * 1024 * 1024 // 80))
    refused(gpunet("validate", str(tmp_path / "big.yaml"), timeout=30), "over gpunet's limit of 262144 bytes")


# 6. plan -o over another site's plan replaced it silently ------------------------------------------

def test_6_plan_keeps_another_sites_plan_unless_fresh(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert gpunet("plan", str(EXAMPLES / "small-ethernet.yaml"), "-o", str(out)).returncode == 0
    before = (out / "plan.json").read_text()
    refused(gpunet("plan", str(EXAMPLES / "one-server.yaml"), "-o", str(out)), "site 'small'", "--fresh")
    assert (out / "plan.json").read_text() == before
    assert gpunet("plan", str(EXAMPLES / "one-server.yaml"), "-o", str(out), "--fresh").returncode == 0
    assert (out / "plan.json.1").read_text() == before  # the replaced plan is kept


def test_6_plan_never_writes_into_a_directory_of_other_things(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    refused(gpunet("plan", "-o", str(home)), "not empty and holds no plan.json")
    refused(gpunet("plan", "-o", "/"), "not empty and holds no plan.json")
    assert [p.name for p in home.iterdir()] == ["notes.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".home")]


def test_6_plan_keeps_what_else_the_plan_directory_holds(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert gpunet("plan", str(EXAMPLES / "small-ethernet.yaml"), "-o", str(out)).returncode == 0
    (out / "cluster.yaml").write_text("the spec, kept beside its plan")
    (out / "render" / "nodes").mkdir(parents=True)
    (out / "render" / "nodes" / "x").symlink_to("/etc/hostname")
    spec = (EXAMPLES / "small-ethernet.yaml").read_text().replace("node[01-40]", "node[01-44]")
    (tmp_path / "more.yaml").write_text(spec)
    assert gpunet("plan", str(tmp_path / "more.yaml"), "-o", str(out)).returncode == 0
    assert (out / "cluster.yaml").read_text() == "the spec, kept beside its plan"
    assert os.readlink(out / "render" / "nodes" / "x") == "/etc/hostname"
    assert '"node44"' in (out / "plan.json").read_text() and '"node44"' not in (out / "plan.json.1").read_text()


def test_6_plan_refuses_to_drop_nodes_unless_fresh(tmp_path: Path) -> None:
    out = tmp_path / "out"
    spec = (EXAMPLES / "small-ethernet.yaml").read_text()
    (tmp_path / "fewer.yaml").write_text(spec.replace("node[01-40]", "node[01-30]"))
    assert gpunet("plan", str(EXAMPLES / "small-ethernet.yaml"), "-o", str(out)).returncode == 0
    refused(gpunet("plan", str(tmp_path / "fewer.yaml"), "-o", str(out)), "drops 10 node(s)", "node[31-40]")


# 7. lab up --scale nan wrote a state file lab down could not read (root: tests/lab) ----------------

@pytest.mark.parametrize("scale", ["nan", "inf", "0", "-1"])
def test_7_a_scale_that_is_no_rate_is_refused_before_anything_exists(tmp_path: Path, scale: str) -> None:
    if os.geteuid() == 0 and os.environ.get("GPUNET_OLD_CODE"):
        pytest.skip("an older gpunet builds a real lab here; run without GPUNET_OLD_CODE")
    done = gpunet("lab", "up", "--lab", "q", "--scale", scale, env={"GPUNET_LAB_ROOT": str(tmp_path / "labs")})
    refused(done, "--scale")
    assert not (tmp_path / "labs" / "q").exists()


# 8. a kill during plan left plan.json and the CSVs of different runs ---------------------------------

def _killed_at(limit: int) -> None:
    """From here on, this process SIGKILLs itself at its `limit`-th rename or unlink."""
    count = [0]

    def counted(real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            count[0] += 1
            if count[0] == limit:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)
        return call
    os.replace, os.rename, os.unlink = counted(os.replace), counted(os.rename), counted(os.unlink)


# What `gpunet plan` imports when it runs (its command, the renderers, the drawing): a missing one
# (an older gpunet) is left to the child.
WARM = ("gpunet.api.plans", "gpunet.cli.compare", "gpunet.report.drawing", "gpunet.decide.growth",
        "gpunet.decide.failures")


def forked_gpunet(*args: str, kill_at: int | None = None) -> int:
    """`gpunet ARGS` in a forked child of this process, its exit status as subprocess gives it (-9
    when killed): the same code and a process of its own to kill, without an interpreter's start
    (the kill test runs plan about 80 times)."""
    from gpunet.cli.main import app  # noqa: PLC0415 - the module itself imports no gpunet (see its docstring)

    for name in WARM:  # imported here once, not again in each of the 80 children
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    gc.freeze()  # the children's collector skips this process's heap (no copying it page by page)
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 70
        try:
            quiet = os.open(os.devnull, os.O_WRONLY)
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            if kill_at is not None:
                _killed_at(kill_at)
            app(args=list(args), prog_name="gpunet")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            os._exit(code)
    gc.unfreeze()  # pytest's own heap is collected again
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _counts(out: Path) -> tuple[int, int, int]:
    """Nodes in plan.json, in addresses.csv and in cabling.csv (node ends): equal in one set."""
    plan = json.loads((out / "plan.json").read_text())
    rows = (out / "addresses.csv").read_text().splitlines()[1:]
    cables = (out / "cabling.csv").read_text().splitlines()[1:]
    nodes = {n["name"] for n in plan["nodes"]}
    return len(nodes), len({r.split(",")[0] for r in rows}), len({c.split(",")[2] for c in cables} & nodes)


@pytest.mark.slow
def test_8_a_kill_at_any_step_of_plan_leaves_one_whole_set(tmp_path: Path) -> None:
    """SIGKILL at each rename and unlink the run makes: OUT then holds the old set or the new, never a
    mix, and the next run removes what a killed one left beside OUT."""
    spec = (EXAMPLES / "small-ethernet.yaml").read_text()
    (tmp_path / "more.yaml").write_text(spec.replace("node[01-40]", "node[01-44]"))
    out = tmp_path / "out"
    assert forked_gpunet("plan", str(EXAMPLES / "small-ethernet.yaml"), "-o", str(out)) == 0
    outcomes = set()
    for step in range(1, 40):
        killed = forked_gpunet("plan", str(tmp_path / "more.yaml"), "-o", str(out), kill_at=step) == -signal.SIGKILL
        counts = _counts(out)
        assert counts[0] == counts[1] == counts[2] and counts[0] in (43, 47), (step, counts)
        outcomes.add(counts[0])
        assert forked_gpunet("plan", str(EXAMPLES / "small-ethernet.yaml"), "-o", str(out), "--fresh") == 0
        assert sorted(p.name for p in out.parent.iterdir()) == ["more.yaml", "out"], step
        if not killed:
            break
    assert outcomes == {43, 47}  # kills before and after the switch were both exercised


# 9. tracebacks and exit 1 instead of a message and exit 2 --------------------------------------------

def test_9_an_output_path_that_is_a_file_or_dangling_symlink(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for target in ("file", "dangling"):
        refused(gpunet("plan", "-o", str(tmp_path / target)), "name a directory")
        refused(gpunet("render", "-o", str(tmp_path / target)), "name a directory")
    assert not (tmp_path / "nowhere").exists()


def test_9_a_read_only_output_directory(tmp_path: Path) -> None:
    readonly = tmp_path / "ro"
    readonly.mkdir()
    if os.geteuid() == 0:  # root writes through mode bits: a read-only bind mount in a private namespace
        if shutil.which("unshare") is None:
            pytest.skip("needs unshare (util-linux)")
        script = (f"mount --bind -o ro {readonly} {readonly} && "
                  f"{sys.executable} -m gpunet plan -o {readonly}/out; echo EXIT $?")
        done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                              capture_output=True, text=True, timeout=120, check=False)
        assert "EXIT 2" in done.stdout and "Traceback" not in done.stderr, done.stderr
        assert "Read-only file system" in done.stderr
    else:
        readonly.chmod(0o555)
        refused(gpunet("plan", "-o", str(readonly / "out")), "Permission denied")


def test_9_a_yaml_merge_key_is_located(tmp_path: Path) -> None:
    refused(gpunet("validate", str(BAD_SPECS / "yaml-merge-key" / "spec.yaml")), "spec.yaml:11:5: merge keys")


@pytest.mark.parametrize(("mutation", "needle"), [
    ("garbage address", "nodes.0.interfaces.0.address"),
    ("unknown device", "is not an interface of a node or a switch"),
])
def test_9_a_broken_plan_json_is_a_message(tmp_path: Path, plan_dict: dict[str, Any], mutation: str,
                                           needle: str) -> None:
    data = json.loads(json.dumps(plan_dict))
    if mutation == "garbage address":
        data["nodes"][0]["interfaces"][0]["address"] = "garbage"
    else:
        data["links"][0]["a"]["device"] = "ghost01"
    refused(gpunet("render", str(write_plan(tmp_path, data)), "-o", str(tmp_path / "out")), needle)


def test_9_a_huge_node_range_in_an_option() -> None:
    refused(gpunet("render", "--node", "gpu[1-999999999999]", "-o", "/nonexistent/out"), "limit of 1000000")


def test_9_a_database_that_is_not_one(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a database\n" * 100)
    corrupt = tmp_path / "corrupt.sqlite"
    with sqlite3.connect(corrupt) as db:
        db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY)")
    corrupt.write_bytes(corrupt.read_bytes()[:100] + b"\xff" * 4000)
    for db in ("notes.txt", "corrupt.sqlite"):
        refused(gpunet("bench", "history", "--db", str(tmp_path / db)), "is not a gpunet bench database")


def test_9_a_run_id_past_sqlite_integers(tmp_path: Path) -> None:
    db = tmp_path / "bench.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, started TEXT, plan_hash TEXT, tool TEXT, "
                     "pattern TEXT, arguments TEXT)")
    refused(gpunet("bench", "show", "99999999999999999999999", "--db", str(db)), "no bench run")


def self_signed(directory: Path) -> None:
    """c.pem and k.pem in `directory`: a throwaway self-signed certificate and its key."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl missing (Debian package openssl)")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=x",
                    "-keyout", str(directory / "k.pem"), "-out", str(directory / "c.pem")], check=True,
                   capture_output=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_9_a_client_ca_file_that_is_not_a_certificate(tmp_path: Path) -> None:
    self_signed(tmp_path)
    (tmp_path / "ca.pem").write_text("not a certificate\n")
    (tmp_path / "web.yml").write_text("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n"
                                      "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n")
    refused(gpunet("exporter", "--web-config", str(tmp_path / "web.yml"), "--listen", f"127.0.0.1:{_free_port()}",
                   timeout=120), "client_ca_file")


# 10. accepted though wrong (the spec cases are in tests/fixtures/bad_specs) --------------------------

def test_10_tls_min_version_above_max_version(tmp_path: Path) -> None:
    self_signed(tmp_path)
    (tmp_path / "web.yml").write_text("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n"
                                      "  min_version: TLS13\n  max_version: TLS12\n")
    refused(gpunet("exporter", "--web-config", str(tmp_path / "web.yml"), "--listen", f"127.0.0.1:{_free_port()}",
                   timeout=120),
            "min_version TLS13 is above max_version TLS12")


def test_10_fanout_zero(tmp_path: Path) -> None:
    refused(gpunet("fleet", "run", "gpu1", "--fanout", "0", "--", "true", cwd=tmp_path), "fanout")


@pytest.mark.parametrize("case", [
    "subnet-loopback", "subnet-multicast", "subnet-this-network", "subnet6-unspecified", "subnet6-multicast",
    "subnet6-link-local-zone", "oversubscription-negative", "oversubscription-boolean", "node-named-like-a-switch",
    "device-loopback"])
def test_10_specs_accepted_though_wrong_are_refused(case: str) -> None:
    refused(gpunet("validate", str(BAD_SPECS / case / "spec.yaml")),
            json.loads((BAD_SPECS / case / "expected.json").read_text())["message_contains"])


# 13. render followed a symlink inside the output tree -------------------------------------------------

def test_13_render_never_writes_through_a_symlink_in_the_tree(tmp_path: Path) -> None:
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    (out / "nodes" / "gpu001").mkdir(parents=True)
    elsewhere.mkdir()
    (out / "nodes" / "gpu001" / "etc").symlink_to(elsewhere)
    refused(gpunet("render", "-o", str(out), "--node", "gpu001"), "refusing to write through", "nodes/gpu001/etc")
    assert list(elsewhere.iterdir()) == []


# 14. read-only commands created files -------------------------------------------------------------

def test_14_bench_history_creates_no_database_or_directory(tmp_path: Path) -> None:
    refused(gpunet("bench", "history", "--db", str(tmp_path / "new" / "dir" / "typo.sqlite")), "no bench database")
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty.sqlite").touch()
    gpunet("bench", "history", "--db", str(tmp_path / "empty.sqlite"))
    assert (tmp_path / "empty.sqlite").stat().st_size == 0  # no schema written into it


def _crafted_db(path: Path, *statements: str) -> Path:
    with sqlite3.connect(path) as db:
        for statement in statements:
            db.execute(statement)
    return path


RUNS = ("CREATE TABLE runs (id INTEGER PRIMARY KEY, started TEXT, plan_hash TEXT, tool TEXT, pattern TEXT, "
        "arguments TEXT)")
MEASUREMENTS = ("CREATE TABLE measurements (run_id INTEGER, source TEXT, destination TEXT, plane TEXT, metric TEXT, "
                "value REAL, unit TEXT, expected REAL, status TEXT, raw TEXT, rail INTEGER)")


def test_14_a_crafted_database_is_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    endless = _crafted_db(tmp_path / "views.sqlite", MEASUREMENTS, "CREATE VIEW runs AS WITH RECURSIVE c(id) AS "
                          "(SELECT 1 UNION ALL SELECT id + 1 FROM c) SELECT id, 't', 'h', 'x', 'y', '' FROM c")
    refused(gpunet("bench", "history", "--db", str(endless), timeout=30), "not both tables")
    huge = _crafted_db(tmp_path / "huge.sqlite", RUNS, MEASUREMENTS,
                       "INSERT INTO runs VALUES (1, 't', 'h', '[/bold]\x1b]8;;x\x07', 'pair', '')",
                       "INSERT INTO measurements VALUES (1, 'a', 'b', 'compute', 'throughput', 1, 'Gb/s', 1, 'ok', "
                       "replace(zeroblob(100000000), x'00', 'a'), NULL)")
    shown = gpunet("bench", "show", "1", "--db", str(huge), "--json", timeout=60)
    assert shown.returncode in (0, 1) and "Traceback" not in shown.stderr, shown.stderr
    assert len(shown.stdout) < 2_000_000  # the 100 MB raw column is cut, not loaded whole
    assert "\x1b" not in gpunet("bench", "show", "1", "--db", str(huge)).stdout
    typed = _crafted_db(tmp_path / "types.sqlite", RUNS, MEASUREMENTS,
                        "INSERT INTO runs VALUES (1, NULL, 'h', 5, 'p', '')")
    refused(gpunet("bench", "history", "--db", str(typed)), "a row gpunet did not write")


def test_14_a_database_in_wal_mode_gets_no_new_files(tmp_path: Path) -> None:
    db = _crafted_db(tmp_path / "wal.sqlite", RUNS, MEASUREMENTS)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert gpunet("bench", "history", "--db", str(db)).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_9_a_plan_json_that_is_no_regular_file_or_nests_without_end(tmp_path: Path) -> None:
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "plan.json")
    (tmp_path / "zero.json").symlink_to("/dev/zero")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(gpunet("plan", "-o", str(tmp_path / "fifo"), timeout=30), "not a regular file")
    refused(gpunet("render", str(tmp_path / "zero.json"), "-o", str(tmp_path / "r"), timeout=30), "not a regular file")
    refused(gpunet("render", str(tmp_path / "deep.json"), "-o", str(tmp_path / "r"), timeout=30), "cannot read plan")


def test_10_a_nodeset_of_many_dimensions_is_described_quickly(tmp_path: Path, plan_dict: dict[str, Any]) -> None:
    """In CPU seconds of a process of its own (waiting for a loaded host's CPU is not the code's)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "gpunet", "render", str(write_plan(tmp_path, plan_dict)), "-o",
                           str(tmp_path / "r"), "--node", "a[1-10]b[1-10]c[1-10]d[1-10]e[1-10]"],
                          capture_output=True, text=True, timeout=120, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    refused(done, "not in the plan", "(100000 nodes)")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert cpu < 5, cpu  # 10 s and 718 MB before: ClusterShell folded all 100 000
