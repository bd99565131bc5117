"""Restore ``np.row_stack`` for numba-cuda 0.30.4 on numpy >= 2.5.

Why: numba-cuda 0.30.4 registers an overload for ``np.row_stack`` when it sets up
its typing registry. numpy 2.5 removed ``row_stack`` (deprecated alias of
``vstack`` since numpy 2.0), so on numpy 2.5 every ``cuda.jit`` / ``cuda.compile``
fails with::

    AttributeError: module 'numpy' has no attribute 'row_stack'

What: only when numpy has no ``row_stack``, bind ``np.row_stack = np.vstack`` (the
same function the alias always pointed to). On numpy < 2.5 nothing is changed.
``SHIM_APPLIED`` says whether the shim was needed. Import this module before
numba compiles anything; ``tma_kernels.ptx`` imports it first.

When to delete: once the pinned numba-cuda no longer references ``np.row_stack``
(its overload list is in ``numba/cuda/np/arrayobj.py``), or once numpy is pinned
below 2.5 everywhere the artifact runs.
"""

import types

import numpy as np

REMOVED_NAME = "row_stack"  # the numpy attribute numba-cuda 0.30.4 expects
REPLACEMENT_NAME = "vstack"  # what row_stack was an alias of


def apply_shim(numpy_module: types.ModuleType) -> bool:
    """Bind ``numpy_module.row_stack`` to its ``vstack`` if it is missing.

    Looks in the module's own namespace (not through ``getattr``) so that a
    module-level ``__getattr__`` deprecation hook is neither triggered nor
    mistaken for the attribute. Returns True when the shim was applied.
    """
    if REMOVED_NAME in vars(numpy_module):
        return False
    setattr(numpy_module, REMOVED_NAME, getattr(numpy_module, REPLACEMENT_NAME))
    return True


SHIM_APPLIED: bool = apply_shim(np)
