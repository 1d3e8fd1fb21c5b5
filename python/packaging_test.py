"""Packaging is tested like code: `pip install --no-build-isolation` of a copy of python/ into a fresh
virtual environment that sees the system packages, offline (--no-index), then the installed package
is imported from outside the source tree and used. Run by CTest as python_pip_install:

    python3 python/packaging_test.py <work dir>

Exit code 77 (CTest: skipped) when the interpreter cannot make a virtual environment with pip
(Debian: python3-venv) or has no setuptools.
"""

import importlib.util
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

SKIP = 77


def main():
    work = Path(sys.argv[1]).resolve()
    source = Path(__file__).resolve().parent
    if importlib.util.find_spec("setuptools") is None:  # pip --no-build-isolation builds with the installed one
        print("setuptools is missing (Debian: python3-setuptools)")
        return SKIP
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work / "python",
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "tests", "CMakeLists.txt"))
    try:
        venv.create(work / "venv", system_site_packages=True, with_pip=True)
    except (subprocess.CalledProcessError, OSError, SystemExit) as e:  # Debian's venv exits when it lacks pip
        print(f"cannot create a virtual environment with pip ({e}); Debian: python3-venv")
        return SKIP
    python = str(work / "venv" / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ROPEX_INCLUDE_DIR"] = str(source.parent / "include")
    # Unoptimised: this checks the packaging (build, install, import), not the code, which the CMake
    # build's module runs optimised under pytest; -O0 takes a third of the compile time (CFLAGS
    # come after Python's own -O3).
    env["CFLAGS"] = (env.get("CFLAGS", "") + " -O0").strip()
    subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-index", "--disable-pip-version-check",
                    str(work / "python")], check=True, env=env, cwd=work)
    check = (
        "import numpy as np, ropex, sys\n"
        "assert ropex.__file__.startswith(sys.prefix), ropex.__file__\n"
        "x = np.ones((2, 1, 64), np.float32)\n"
        "ropex.RotaryEmbedding(head_dim=64, policy=ropex.Yarn(factor=4.0)).apply(x, [0, 10])\n"
        "assert x[0, 0, 0] != x[1, 0, 0]\n"
        "import importlib.resources as r\n"
        "assert (r.files('ropex') / 'py.typed').is_file() and (r.files('ropex') / '__init__.pyi').is_file()\n"
        "print('installed', ropex.__version__, 'at', ropex.__file__, 'kernel', ropex.kernel_isa())\n"
    )
    subprocess.run([python, "-c", check], check=True, env=env, cwd=work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
