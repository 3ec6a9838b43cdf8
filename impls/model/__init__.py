"""DLRM: bottom MLP, feature interaction, top MLP; and the training step the harness times."""
