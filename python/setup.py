"""Builds the loom package (metadata in pyproject.toml). When the C library
is built (../build/libloom.so, or $LOOM_BUILD_DIR/libloom.so), it is copied
into the package as loom/libloom.so, which the ctypes loader tries first, and
the wheel is tagged for this platform (py3-none-<platform>: the package is
ctypes only, so any Python 3 will do, but the library is native code). Without
a built library the package is pure Python and loads an installed libloom
(make install) at import time."""
import os
import shutil

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))


def built_library():
    build = os.environ.get("LOOM_BUILD_DIR") or os.path.join(HERE, "..", "build")
    path = os.path.join(build, "libloom.so")
    return os.path.realpath(path) if os.path.exists(path) else None


class BuildPy(build_py):
    def run(self):
        super().run()
        dst = os.path.join(self.build_lib, "loom", "libloom.so")
        src = built_library()
        if src:
            shutil.copyfile(src, dst)
            os.chmod(dst, 0o755)
        elif os.path.exists(dst):  # a copy left by an earlier build
            os.remove(dst)


class BinaryDistribution(Distribution):
    """Native code inside: the wheel's files go to platlib and its tag names the platform."""

    def has_ext_modules(self):
        return built_library() is not None


class BdistWheel(bdist_wheel):
    def get_tag(self):
        impl, abi, plat = super().get_tag()
        return (impl, abi, plat) if self.root_is_pure else ("py3", "none", plat)


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel})
