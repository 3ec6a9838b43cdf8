"""dlrmbench implementations: the embedding interface, the native op core, data, model and systems."""
