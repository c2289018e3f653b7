"""Neutral helpers for files, used by several packages: bounded YAML documents with locations
(yamldoc) and the one atomic writer that stays inside its output tree (write). They import only
errors and the standard library, so any layer may use them."""
