"""The steps a command runs end to end, composed from the harness (runs, records) and the analysis (summaries,
figures, models): a sweep with its rounds until resolved, summary and figures (sweep.py); `reproduce`'s experiments
and models (reproduce.py); `bench` (bench.py). The command line parses and prints; these do the work and report it
through callbacks and return values, never by printing."""
