"""gpunet's tests. Imported before the conftest and every test module."""

import sys

# Bytecode, and pytest's rewritten test modules, are cached beside the sources (git ignores them)
# even where PYTHONDONTWRITEBYTECODE is set: without the cache every run, every xdist worker and
# every `gpunet` subprocess a test starts compiles the tree again.
sys.dont_write_bytecode = False
