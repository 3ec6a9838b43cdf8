"""The harness: run points and experiments (config), one fresh process per run (launch, worker, torchrun, rank,
lifeline, fault), the step loops and the clock (training, memory), sweeps (sweep, slurm), the record and where it
lives (records, machine), the noise probe (noise) and dataset manifests (datasets)."""
