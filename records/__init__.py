# Before any module of this room loads: which build runs (``compiled.py``).
from . import compiled as compiled  # noqa: F401
