"""EcoRec (Wang et al., SC 2024): C-M forward / M-C backward over sorted-index micro-batches."""
