"""Give the memory of freed messages back to the operating system.

CPython hands large ``bytes`` (message bodies) to the C allocator. glibc raises its mmap
threshold each time such a block is freed, so after a burst of large messages later ones
come from the heap and the freed memory stays with the process (a router that carried
1 GB keeps 1 GB). Pinning the threshold keeps large bodies in their own mappings, which
are returned at once; ``trim`` returns what the heap itself has free. On a C library
without these calls (musl, macOS) both do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3  # mallopt parameter (glibc malloc.h)
MMAP_THRESHOLD = 128 * 1024


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    if lib is None or not hasattr(lib, "mallopt") or not hasattr(lib, "malloc_trim"):
        return None
    return lib


_LIBC = _libc()


def pin_mmap_threshold(nbytes: int = MMAP_THRESHOLD) -> bool:
    """Keep blocks of ``nbytes`` and more in their own mappings; True if the C library took it."""
    return bool(_LIBC is not None and _LIBC.mallopt(M_MMAP_THRESHOLD, nbytes))


def trim() -> None:
    """Return the heap's free memory to the operating system."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
