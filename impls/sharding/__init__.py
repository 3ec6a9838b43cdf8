"""Sharding any system over ranks, knowing it only through the interface (impls/api.py): the process groups and
accounted collectives, table placement, the table-wise and data-parallel wrappers and their pipelines, and the
build that picks a wrapper or a system's own build_distributed."""
