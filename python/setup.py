"""Packages the kvrt Python package that CMake built beside this file.

Run from the build tree (``pip install --no-build-isolation build/python``):
it installs the directory as built (the pybind11 module and libkvrt beside
it); it compiles nothing.
"""

import glob
import os

from setuptools import setup
from setuptools.dist import Distribution

here = os.path.dirname(os.path.abspath(__file__))
if not glob.glob(os.path.join(here, "kvrt", "_kvrt*.so")):
    raise SystemExit("kvrt: build the package first (cmake --build build --target kvrt_python), "
                     "then install build/python, not python/")


class BinaryDistribution(Distribution):
    """The package carries compiled modules: a platform wheel."""

    def has_ext_modules(self):
        return True


setup(
    name="kvrt",
    version="0.1.0",
    description="Python session of a kvrt node: exact shared K/V-cache memory for LLM serving",
    packages=["kvrt", "kvrt.integrations"],
    package_data={"kvrt": ["_kvrt*.so", "libkvrt.so*", "*.pyi", "py.typed"]},
    python_requires=">=3.9",
    install_requires=["numpy"],
    distclass=BinaryDistribution,
    zip_safe=False,
)
