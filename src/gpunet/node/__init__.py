"""Code that runs ON the nodes: the apply agent (shipped with every apply as one script, see
bundle.py) and the path prober (`python -m gpunet.node.paths`).

Standard library only (tests/node/test_stdlib_only.py fails on any other import): a node needs
python3 and nothing else for these. The controller and the agent share the typed contract in
contract.py; nothing here imports the rest of gpunet.
"""
