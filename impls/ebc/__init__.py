"""The suite's embedding systems as TorchRec-compatible modules: built from ``EmbeddingBagConfig``s, fed a
``KeyedJaggedTensor``, returning a ``KeyedTensor`` (module.py: SystemEBC), with the embedding optimizer declared per
table and applied inside backward (optimizers.py), and the one conversion between TorchRec's batches and the suite's
SparseFeatures (kjt.py, layout.py)."""
