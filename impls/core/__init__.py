"""The shared native op core (torch.ops.dlrmbench) and the pure-Python pieces that sit right on it."""
