"""The columns of the public click-log formats: Criteo's 13 dense counts I1..I13 and 26 categoricals C1..C26, and
Avazu's 22 categorical fields. The parsers (criteo.py, avazu.py) read lines by them, prepared data names its tables
after them, and the presets that stand in for these datasets name their synthetic tables the same way (without
loading a parser)."""
from __future__ import annotations

CRITEO_NUM_DENSE, CRITEO_NUM_CAT = 13, 26
CRITEO_DENSE = tuple(f"I{i}" for i in range(1, CRITEO_NUM_DENSE + 1))
CRITEO_CAT = tuple(f"C{i}" for i in range(1, CRITEO_NUM_CAT + 1))

AVAZU_CAT = ("hour", "C1", "banner_pos", "site_id", "site_domain", "site_category", "app_id", "app_domain",
             "app_category", "device_id", "device_ip", "device_model", "device_type", "device_conn_type",
             "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21")
