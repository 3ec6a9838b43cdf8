"""Builds the native op library ``impls.core._C`` (all metadata lives in pyproject.toml).

CppExtension always; CUDAExtension when the installed torch has CUDA and CUDA_HOME is set.
Environment knobs (build-time only):
  DLRMBENCH_PORTABLE=1   no -march=native (for wheels that move between machines)
  DLRMBENCH_CUDA=auto|0|1  force the CUDA build on or off (default: auto)
  DLRMBENCH_NO_EXT=1     install the Python packages without building the library (the Makefile
                         builds it in place with `make ext`, so pip never compiles it twice)
"""
import glob
import json
import os

from setuptools import setup

ext_modules = []
cmdclass = {}
if os.environ.get("DLRMBENCH_NO_EXT") != "1":
    import torch
    from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension, CUDAExtension

    mode = os.environ.get("DLRMBENCH_CUDA", "auto")
    use_cuda = (torch.version.cuda is not None and CUDA_HOME is not None) if mode == "auto" else mode == "1"
    csrc = "impls/core/csrc"
    sources = sorted(glob.glob(f"{csrc}/*.cpp") + glob.glob(f"{csrc}/cpu/*.cpp"))
    cxx = ["-O3", "-fopenmp"]
    if os.environ.get("DLRMBENCH_PORTABLE") != "1":
        cxx.append("-march=native")
    extra = {"cxx": cxx}
    macros = []
    Ext = CppExtension
    if use_cuda:
        Ext = CUDAExtension
        sources += sorted(glob.glob(f"{csrc}/cuda/*.cu"))
        extra["nvcc"] = ["-O3"]
        macros.append(("WITH_CUDA", None))
    ext_modules.append(Ext("impls.core._C", sources, extra_compile_args=extra, define_macros=macros))
    # the flags this library is built with, beside it: a run's record keeps them (reproduce/harness/fingerprint.py)
    with open("impls/core/_C.build.json", "w") as stamp:
        json.dump({"flags": extra, "macros": [m for m, _ in macros], "cuda": use_cuda}, stamp, sort_keys=True)
    cmdclass["build_ext"] = BuildExtension

setup(ext_modules=ext_modules, cmdclass=cmdclass)
