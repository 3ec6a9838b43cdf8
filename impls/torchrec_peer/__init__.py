"""TorchRec's DistributedModelParallel over an EmbeddingBagCollection as a peer of EMBark (optional dependency:
torchrec and fbgemm-gpu)."""
