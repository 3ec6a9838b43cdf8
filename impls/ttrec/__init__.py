"""TT-Rec (Yin et al., MLSys 2021; FBTT-Embedding): per-occurrence TT lookups in chunks."""
