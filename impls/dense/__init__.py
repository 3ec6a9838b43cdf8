"""Dense (uncompressed) baselines: nn.EmbeddingBag and fbgemm's table-batched embedding (TBE)."""
