"""The node side (gpunet.node: the apply agent, the path prober) runs where only python3 is
installed: it imports the standard library and itself, nothing else."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import gpunet.node
from gpunet.node.bundle import agent_script

NODE = Path(gpunet.node.__file__).parent


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_every_module_imports_only_the_standard_library_or_the_node_package() -> None:
    modules = sorted(NODE.glob("*.py"))
    assert len(modules) >= 8
    for path in modules:
        foreign = {name for name in _imports(path) if name.split(".")[0] not in sys.stdlib_module_names
                   and not name.startswith("gpunet.node") and name != "__future__"}
        assert not foreign, (path.name, foreign)


def test_the_bundled_agent_runs_with_nothing_but_the_standard_library(tmp_path: Path) -> None:
    """`python3 -I -S` (no site-packages, no PYTHONPATH): the one script carries the whole package."""
    script = tmp_path / "agent.py"
    script.write_text(agent_script())
    done = subprocess.run([sys.executable, "-I", "-S", str(script), "status", "--root", str(tmp_path / "root")],
                          capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"configuration": "untouched by gpunet apply"' in done.stdout


def test_the_bundle_rebuilds_itself_from_what_it_carries(tmp_path: Path) -> None:
    """The agent keeps a copy of itself for its worker and guard: the same text, byte for byte."""
    script = tmp_path / "agent.py"
    script.write_text(agent_script())
    # the script without its last line (which runs the agent), then the bundle asked for its own text
    loader = (f"text = open({str(script)!r}).read()\n"
              "exec(compile(text.rsplit('sys.exit(main())', 1)[0], 'agent', 'exec'))\n"
              "from gpunet.node.bundle import agent_script\n"
              "print(agent_script() == text)")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", loader], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.stdout.strip() == "True", done.stderr
