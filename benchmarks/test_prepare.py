"""Preprocessing throughput of `data prepare` (both passes, bytes of raw file per second) on generated files in
the real formats: Criteo TSV with random 32-bit categoricals (many distinct values, the costly case) and
Avazu CSV with Zipf-skewed hashed ids."""
import numpy as np
import pandas as pd
import pytest

from benchmarks.conftest import report
from impls.data.avazu import HEADER
from impls.data.prepare import prepare_text

ROWS = {"criteo": 200_000, "avazu": 300_000}


def write_criteo(path, n, seed=0):
    rng = np.random.default_rng(seed)
    cols = {"label": rng.integers(0, 2, n)}
    for j in range(13):
        v = rng.integers(-2, 500, n).astype(object)
        v[rng.random(n) < 0.1] = ""
        cols[f"I{j}"] = v
    for j in range(26):
        cols[f"C{j}"] = [format(int(x), "08x") for x in rng.integers(0, 2**32, n)]
    pd.DataFrame(cols).to_csv(path, sep="\t", header=False, index=False)


def write_avazu(path, n, seed=0):
    rng = np.random.default_rng(seed)
    cols = {"id": rng.integers(10**18, 10**19, n, dtype=np.uint64), "click": rng.integers(0, 2, n),
            "hour": 14102100 + rng.integers(0, 24, n)}
    names = HEADER.decode().split(",")[3:]
    for name in names:
        ranks = np.minimum(rng.zipf(1.3, n), 2**28)
        cols[name] = [format(int(x) * 2654435761 % 2**32, "08x") for x in ranks]
    with open(path, "w") as f:
        f.write(HEADER.decode() + "\n")
    pd.DataFrame(cols).to_csv(path, mode="a", header=False, index=False)


@pytest.mark.parametrize("reader", ["criteo", "avazu"])
def test_prepare_throughput(benchmark, tmp_path, reader):
    raw = tmp_path / ("train.txt" if reader == "criteo" else "train.csv")
    (write_criteo if reader == "criteo" else write_avazu)(raw, ROWS[reader])
    layout = "kaggle" if reader == "criteo" else "random-8-1-1"
    runs = iter(range(100))
    meta = benchmark.pedantic(lambda: prepare_text(reader, [raw], tmp_path / f"p{next(runs)}", reader, layout),
                              rounds=2, iterations=1)
    assert sum(meta.rows.values()) == ROWS[reader]
    mib = raw.stat().st_size / 2**20
    benchmark.extra_info.update(format=reader, rows=ROWS[reader], file_mib=mib)
    report("data prepare throughput", {"format": reader, "rows": ROWS[reader], "file MiB": mib,
                                       "median s": benchmark.stats["median"],
                                       "raw MiB/s": mib / benchmark.stats["median"]},
           "raw MiB/s = file size / wall time of the whole two-pass prepare (each pass reads the file once)")


def test_tabular_prepare_throughput(benchmark, tmp_path):
    """`data prepare tabular` on a MovieLens-like CSV: a time column, two dense columns, string ids of Zipf-skewed
    users and items, a multi-hot genre field and a rating turned into clicks by a rule."""
    from impls.data.tabular import prepare_tabular
    from impls.data.tabular_schema import Schema

    n = 300_000
    rng = np.random.default_rng(0)
    genres = np.array(["action", "comedy", "drama", "horror", "romance", "scifi", "doc", "kids"])
    pd.DataFrame({
        "ts": np.sort(rng.integers(0, 10**8, n)), "user": [f"u{x}" for x in rng.zipf(1.2, n) % 50_000],
        "item": [f"i{x}" for x in rng.zipf(1.1, n) % 200_000],
        "genre": ["|".join(genres[rng.choice(8, k, replace=False)]) for k in rng.integers(1, 4, n)],
        "hour": rng.integers(0, 24, n), "age": rng.normal(35, 10, n).round(1), "rating": rng.integers(1, 6, n),
    }).to_csv(tmp_path / "clicks.csv", index=False)
    schema = Schema.from_flags("rating>=4", "hour:log1p,age", "user,item,genre:sep=|", "time:ts:0.8")
    runs = iter(range(100))
    meta = benchmark.pedantic(lambda: prepare_tabular([tmp_path / "clicks.csv"], schema, tmp_path / f"p{next(runs)}"),
                              rounds=2, iterations=1)
    assert sum(meta.rows.values()) == n
    mib = (tmp_path / "clicks.csv").stat().st_size / 2**20
    benchmark.extra_info.update(format="tabular csv", rows=n, file_mib=mib)
    report("data prepare throughput", {"format": "tabular csv", "rows": n, "file MiB": mib,
                                       "median s": benchmark.stats["median"],
                                       "raw MiB/s": mib / benchmark.stats["median"]},
           "raw MiB/s = file size / wall time of the whole two-pass prepare (each pass reads the file once)")
