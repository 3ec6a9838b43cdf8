"""The dlrmbench harness: the command line (cli/), running points and sweeps into records (harness/), and turning
records into tables, claims, models and figures (analysis/)."""
