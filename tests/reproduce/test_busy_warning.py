"""A single `run` / `train` probes the machine before and after its runs (a fixed SGEMM and the load average) and
warns below its table when the machine was busy: its step times and ratios would measure the machine."""
from click.testing import CliRunner

from reproduce.cli import cli
from reproduce.harness import noise
from reproduce.harness.noise import busy_machine

SMALL = ["--impl", "dense-torch", "--data", "uniform", "--num-tables", "2", "--rows", "100",
         "--dim", "4", "-b", "8", "--iters", "1", "--warmup", "0", "--mode", "embedding-only"]


def _probe(gflops, load=0.1, cores=2):
    med = sorted(gflops)[len(gflops) // 2]
    return {"gflops": gflops, "gflops_median": med, "spread": (max(gflops) - min(gflops)) / med,
            "loadavg": [load, load, load], "cores": cores}


def test_a_quiet_machine_is_not_called_busy():
    assert busy_machine(_probe([100, 102, 101]), _probe([99, 101, 100])) is None
    assert busy_machine(_probe([100, 102, 101]), None) is None


def test_load_before_the_runs_a_moving_sgemm_and_drift_each_call_it_busy():
    why = busy_machine(_probe([100, 101, 100], load=1.9), _probe([100, 101, 100], load=3.0))
    assert "1.9 processes were runnable" in why and "0.95 per core" in why
    assert "within one probe" in busy_machine(_probe([60, 100, 101]), None)
    assert "from before the runs to after them (100 -> 40 GFLOP/s)" in busy_machine(_probe([100] * 3), _probe([40] * 3))
    assert "runnable" not in busy_machine(_probe([100] * 3), _probe([40] * 3, load=5.0))  # the runs' own load: not counted


def test_run_warns_below_its_table_when_the_machine_was_busy(monkeypatch, tmp_path):
    probes = iter([_probe([100, 101, 100], load=3.0), _probe([50, 51, 50])])
    monkeypatch.setattr(noise, "probe", lambda **kw: next(probes))
    res = CliRunner().invoke(cli, ["run", *SMALL, "--out", str(tmp_path / "busy")], terminal_width=300)
    text = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert "warning: the machine was busy: 3.0 processes were runnable" in text and "100 -> 50 GFLOP/s" in text
    assert text.index("warning: the machine was busy") > text.rindex("dense-torch")  # below the table
