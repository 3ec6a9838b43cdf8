"""The simple embedding-compression methods raced against TT at the same memory: the hashing trick, quotient-
remainder compositional tables and mixed-dimension tables (FP16 weights are dense-fbgemm's `weights_precision`).
Each sizes its tables from a byte budget (budget.py) with the same small-table threshold."""
