"""EMBark (RecSys'24; NVIDIA HugeCTR's embedding collection): data-parallel, reduction-based and unique-based
embedding clusters over flexible 3D shards, placed by a cost-model greedy planner."""
