"""The work model (docs/methodology.md, "The work model"): what a step of a system does, counted without running
a kernel (counts.py: the systems' own stage plans over index statistics; index_law.py: their expectation under an
id law), and, from the work and a device profile, its time (reproduce/analysis/work_model/)."""
