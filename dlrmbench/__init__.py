"""dlrmbench as a library: ``dlrmbench.systems`` holds the suite's embedding systems as TorchRec-compatible modules
and ``load_model``, a kept model as a plain module (docs/library.md). The command line is ``dlrmbench`` (reproduce/)."""
