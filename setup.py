"""The one thing pyproject.toml cannot say: which packages, under which names.

The repository keeps its rooms at the top (``router/``, ``records/``, ``tools/``, ...);
installed, they are one namespace, ``once.router``, ``once.records``, ..., because
top-level names like ``tools`` or ``records`` belong to other projects on PyPI (an
editable ``tools`` elsewhere shadowed ours). Subpackages are found, not listed, so a new
one cannot be left out of the wheel.
"""

from setuptools import find_packages, setup

ROOMS = ("router", "linkstate", "records", "tools", "topologies")

setup(
    packages=[f"once.{name}" for name in find_packages(include=[f"{room}*" for room in ROOMS])],
    package_dir={f"once.{room}": room for room in ROOMS},
)
