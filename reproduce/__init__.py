"""The dlrmbench harness: CLI, run points, records, sweeps, aggregation and figures."""
