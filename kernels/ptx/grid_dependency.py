"""Programmatic dependent launch (PDL, sm_90+): a kernel launched with programmatic stream
serialization may start before the kernel ahead of it on the stream has finished.

``griddepcontrol_launch_dependents()`` (in the earlier kernel): once every CTA of its grid has
issued it or exited, the dependent grid may be scheduled. One thread per CTA is enough: later
invocations by the CTA's threads have no further effect.

``griddepcontrol_wait()`` (in the dependent kernel, before it reads what the earlier one
wrote): waits until the prerequisite grids have completed and their memory operations are
visible. In a kernel launched without the attribute both are no-ops. No operands.
"""

from numba.cuda.extending import intrinsic

from ._asm import asm_intrinsic


@intrinsic
def griddepcontrol_launch_dependents(typingctx):
    """``griddepcontrol.launch_dependents;``: let the dependent grid launch early."""
    return asm_intrinsic("griddepcontrol.launch_dependents;", (), ())


@intrinsic
def griddepcontrol_wait(typingctx):
    """``griddepcontrol.wait;``: wait for the prerequisite grids and their memory."""
    return asm_intrinsic("griddepcontrol.wait;", (), ())
