"""Builds the ropex Python extension from this checkout, offline:

    pip install --no-build-isolation ./python

needs a C++17 compiler, Python headers, pybind11 and setuptools (Debian: python3-dev
python3-pybind11 python3-setuptools), NumPy, Eigen 3.4 (libeigen3-dev) and nlohmann/json
(nlohmann-json3-dev). The ropex headers come from ../include ($ROPEX_INCLUDE_DIR overrides that,
for a copy of this directory). Eigen is looked for in $ROPEX_EIGEN_INCLUDE, then through
pkg-config, then in /usr/include/eigen3.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

HERE = Path(__file__).resolve().parent
INCLUDE = Path(os.environ.get("ROPEX_INCLUDE_DIR") or HERE.parent / "include").resolve()


def eigen_include():
    if os.environ.get("ROPEX_EIGEN_INCLUDE"):
        return os.environ["ROPEX_EIGEN_INCLUDE"]
    if shutil.which("pkg-config"):
        try:
            flags = subprocess.run(["pkg-config", "--cflags-only-I", "eigen3"], check=True, capture_output=True,
                                   text=True).stdout.split()
            for flag in flags:
                if flag.startswith("-I"):
                    return flag[2:]
        except subprocess.CalledProcessError:
            pass
    return "/usr/include/eigen3"


def version():
    text = (INCLUDE / "ropex" / "version.hpp").read_text()
    parts = [re.search(rf"ROPEX_VERSION_{part} (\d+)", text).group(1) for part in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


if not (INCLUDE / "ropex" / "ropex.hpp").is_file():
    raise SystemExit(f"ropex headers not found in {INCLUDE}: build from a ropex checkout (pip install ./python)")

# The compiler runs in this directory; setuptools wants relative source paths.
os.chdir(HERE)
ParallelCompile("ROPEX_JOBS", default=2).install()

setup(
    name="ropex",
    version=version(),
    description="RoPE kernels with exact angles and the context-extension policies of real checkpoints",
    license="MIT",
    packages=["ropex"],
    package_data={"ropex": ["py.typed", "*.pyi"]},
    ext_modules=[
        Pybind11Extension(
            "ropex._ropex",
            # The kernel tables' three parts first: they take longest, so they start first.
            [str(p.relative_to(HERE)) for p in sorted((HERE / "src").glob("*.cpp"),
                                                      key=lambda f: (not f.name.startswith("kernel_tables"), f.name))],
            include_dirs=[str(INCLUDE), eigen_include()],
            cxx_std=17,
            # The kernel tables compile once, in src/kernel_tables_part*.cpp (README, "Compile time").
            define_macros=[("ROPEX_SEPARATE_KERNELS", None)],
            # Python's own CFLAGS ask for -g: debug information for every kernel instantiation
            # slows the build and bloats the module; the CMake build has none in Release either.
            extra_compile_args=["-g0"],
        )
    ],
    cmdclass={"build_ext": build_ext},
    python_requires=">=3.9",
    install_requires=["numpy"],
    zip_safe=False,
)
