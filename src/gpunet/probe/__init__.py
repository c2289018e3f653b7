"""Reading one node as it is: pure parsers of tool output, and readers of /sys and /proc that
take a root path (DESIGN.md #2, #3)."""
