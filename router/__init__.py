# Before any module of this room loads: which build runs (``records/compiled.py``).
from once.records import compiled as _compiled  # noqa: F401
