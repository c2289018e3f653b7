"""The agent as one script: this package's sources embedded and served by a small importer, so
`python3 SCRIPT` (or `python3 -c SCRIPT`) runs it on a node that has nothing of gpunet installed,
and a node that has another version runs this one. The script rebuilds itself from the sources it
carries (the agent keeps a copy beside its journal for the worker and the guard)."""

from __future__ import annotations

from pathlib import Path

PACKAGE = "gpunet.node"
MODULES = ("contract", "files", "journal", "runtime", "guard", "transaction", "bundle", "agent")
BOOT = '''# gpunet node agent: the gpunet.node package bundled into one script (standard library only)
import importlib.abc
import importlib.util
import sys

SOURCES = {sources}
PACKAGES = ("gpunet", "gpunet.node")


class Bundled(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    gpunet_sources = SOURCES

    def find_spec(self, name, path=None, target=None):
        if name not in SOURCES:
            return None
        return importlib.util.spec_from_loader(name, self, is_package=name in PACKAGES)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        where = "<gpunet-node>/" + module.__name__.replace(".", "/") + ".py"
        exec(compile(SOURCES[module.__name__], where, "exec"), module.__dict__)


sys.meta_path.insert(0, Bundled())
from gpunet.node.agent import main  # noqa: E402

sys.exit(main())
'''


def package_sources() -> dict[str, str]:
    """Module name -> source: the ones this module was loaded with inside a bundle, else the files."""
    carried = getattr(globals().get("__loader__"), "gpunet_sources", None)
    if isinstance(carried, dict):
        return carried
    here = Path(__file__).parent
    sources = {"gpunet": "", PACKAGE: (here / "__init__.py").read_text()}
    return sources | {f"{PACKAGE}.{m}": (here / f"{m}.py").read_text() for m in MODULES}


def agent_script() -> str:
    """The whole agent as one Python script (the same text wherever it is built from)."""
    return BOOT.format(sources=repr(package_sources()))
