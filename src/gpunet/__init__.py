"""gpunet: design, render, emulate, check, benchmark and monitor a GPU cluster's network."""

__version__ = "0.1.0"
