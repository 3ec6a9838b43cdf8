"""Step time from work and a device profile (docs/methodology.md, "The work model").

A step's work (counts.StepModel) splits into components, each turned into seconds at the device's rate:
  tables    one per TT table looked up (a table's fixed cost: its launches, host syncs, allocations), in ms
  flops     the stages' FLOPs over the device's fp32 peak
  stages    the bytes the stages move (traffic.py) over its memory bandwidth
  lookups   the pooling and index bytes over its memory bandwidth
A system's time is sum_c k_c * component_c, with one non-negative constant per component and system: its
efficiency, fitted (non-negative least squares on relative error) on a declared calibration subset of measured
points and stored with that subset's name. It is never fitted on the points it is validated on."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DEVICES = Path(__file__).resolve().parent / "devices"
COMPONENTS = ("tables", "flops", "stages", "lookups")


@dataclass(frozen=True)
class Device:
    """A device profile (devices/*.toml): rates from a spec sheet, with their source."""

    name: str
    source: str
    fp32_flops: float
    hbm_bytes_s: float
    l2_bytes: float = 0.0
    memory_bytes: float = 0.0
    launch_s: float = 0.0
    nvlink_bytes_s: float = 0.0
    network_bytes_s: float = 0.0

    @classmethod
    def named(cls, name: str) -> "Device":
        path = DEVICES / f"{name.lower()}.toml"
        if not path.is_file():
            known = ", ".join(sorted(p.stem for p in DEVICES.glob("*.toml")))
            raise ValueError(f"no device profile {name!r}; the profiles: {known}")
        with open(path, "rb") as f:
            return cls(**tomllib.load(f))


def components(step, device: Device) -> np.ndarray:
    """Seconds of each component of ``step`` (counts.StepModel) on ``device``, before the efficiencies."""
    w, t = step.work, step.traffic
    return np.array([step.tt_tables * 1e-3, (w.flops["fwd"] + w.flops["bwd"]) / device.fp32_flops,
                     (t.stage_fwd + t.stage_bwd) / device.hbm_bytes_s, (t.pooling + t.index) / device.hbm_bytes_s])


@dataclass
class Efficiency:
    """One system's constants on one device, and the calibration subset they were fitted on."""

    system: str
    device: str
    calibration: str
    k: dict[str, float] = field(default_factory=dict)

    def seconds(self, step, device: Device) -> float:
        return float(components(step, device) @ np.array([self.k[c] for c in COMPONENTS]))

    @classmethod
    def fit(cls, system: str, device: Device, calibration: str, steps, seconds) -> "Efficiency":
        """Fit on (step, measured seconds) pairs by non-negative least squares on relative error."""
        from scipy.optimize import nnls

        X = np.array([components(s, device) for s in steps])
        y = np.asarray(seconds, dtype=np.float64)
        if len(y) < 2:
            raise ValueError(f"{system}: a fit needs at least 2 calibration points, got {len(y)}")
        k, _ = nnls(X / y[:, None], np.ones(len(y)))
        return cls(system, device.name, calibration, dict(zip(COMPONENTS, map(float, k))))
