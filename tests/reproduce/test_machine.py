"""Machine fingerprints and slugs: readable, file-name safe, distinct for machines that measure differently; the
result set read by plot / report: this machine's when it has records, else the reference set."""
import pytest

from reproduce.harness.machine import check_slug, fingerprint, isa, pick_machine, slug_of, this_machine


def test_slugs_name_gpus_and_cpus():
    gpu = {"gpu_count": 8, "gpu": "NVIDIA H100 80GB HBM3", "cpu": "Intel(R) Xeon(R) Platinum 8480+", "cores": 224}
    assert slug_of(gpu) == "8x-h100-80gb-hbm3"
    assert slug_of({"gpu_count": 1, "gpu": "NVIDIA H200"}) == "1x-h200"
    epyc = {"gpu_count": 0, "cpu": "AMD EPYC", "cores": 2, "isa": "avx2"}
    assert slug_of(epyc) == "amd-epyc-2c"
    assert slug_of({**epyc, "isa": "avx512"}) == "amd-epyc-2c-avx512"  # Zen 5 vs Zen 3: different kernels' speed
    xeon = {"gpu_count": 0, "cpu": "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz", "cores": 28, "isa": "avx2"}
    assert slug_of(xeon) == "intel-xeon-e5-2680-v4-28c"
    assert slug_of({"gpu_count": 0, "cpu": "AMD EPYC 7B13 64-Core Processor", "cores": 4, "isa": "avx2"}) == \
        "amd-epyc-7b13-4c"
    assert isa({"avx2", "avx512f"}) == "avx512" and isa({"asimd"}) == "neon" and isa(set()) == "scalar"


def test_this_machine_is_a_valid_slug_and_names_can_be_given():
    fp = fingerprint()
    assert fp["cores"] >= 1 and fp["torch"] and "gpu_count" in fp
    assert check_slug(this_machine()) == slug_of(fp)
    assert this_machine("my-cluster") == "my-cluster"
    for bad in ("../x", "a/b", "", "UPPER", "-lead", "x" * 65):
        with pytest.raises(ValueError, match="machine name"):
            check_slug(bad)


def test_pick_machine_prefers_this_machines_records_then_the_reference(tmp_path):
    results = tmp_path / "results"
    exp = results / "e"
    (exp / "ref-box").mkdir(parents=True)
    (exp / "ref-box" / "p.r0.json").write_text("{}")
    (results / "REFERENCE_MACHINE").write_text("ref-box\n")
    assert pick_machine(exp, results) == "ref-box"  # no records of this machine: the reference set
    assert pick_machine(exp, results, "other") == "other"
    here = this_machine()
    (exp / here).mkdir()
    (exp / here / "p.r0.json").write_text("{}")
    assert pick_machine(exp, results) == here
