"""Compile a numba-cuda kernel for sm_90a without a GPU, and inspect the result.

Pipeline: numba -> PTX (``cc=(9, 0, "a")``) -> ``ptxas -arch=sm_90a -v`` -> cubin
(registers, static shared memory, stack frame and spills parsed from the ``-v``
report) -> ``nvdisasm -c`` -> SASS text. Used by the CPU tests to check that
each inline-PTX intrinsic becomes the promised SASS instruction.

The CUDA tools come from the ``nvidia`` pip wheels (``nvidia/cu13/bin``), else
``$CUDA_HOME/bin``, else ``PATH``: see :func:`find_cuda_tool`.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import tma_kernels.numpy_compat  # noqa: F401  (before numba compiles anything)
from numba import cuda

#: numba's compute capability for Hopper with the arch-specific ("a") features.
SM90A_CC = (9, 0, "a")
SM90A_ARCH = "sm_90a"
#: Folder of the CUDA 13 tools inside the ``nvidia`` namespace package of the wheels.
WHEEL_TOOL_DIR = pathlib.Path("cu13", "bin")

#: pip packages that ship each tool, for the error message.
_TOOL_PACKAGES = {
    "ptxas": "nvidia-cuda-nvcc (pip install 'cuda-toolkit[nvcc]')",
    "nvdisasm": "nvidia-cuda-nvdisasm (pip install nvidia-cuda-nvdisasm)",
}

_ENTRY = re.compile(r"^\.(?:visible\s+)?\.entry\s+(\S+?)\s*\(", re.MULTILINE)
# One SASS instruction line of nvdisasm: "  /*0150*/   @!P0 LDGSTS.E.BYPASS.128 [R1], ... ;"
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?P<instruction>.*?)\s*;?\s*$", re.MULTILINE)
# The mnemonic with its modifiers, after an optional predicate ("@P0", "@!UPT").
_MNEMONIC = re.compile(r"^(?:@!?U?P(?:T|\d+)\s+)?(?P<mnemonic>[A-Z][A-Z0-9_.]*)")


class ToolNotFoundError(FileNotFoundError):
    """A CUDA command-line tool (ptxas, nvdisasm) is not installed."""


class CudaToolError(RuntimeError):
    """A CUDA command-line tool failed; the message holds its stderr."""


@dataclasses.dataclass(frozen=True)
class CompiledKernel:
    """One kernel compiled for sm_90a: its PTX, cubin, SASS and ptxas resources."""

    name: str
    ptx: str
    cubin: bytes
    sass: str
    registers: int
    shared_bytes_static: int
    stack_frame_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int

    def instructions(self) -> list[str]:
        """SASS instructions in address order, as nvdisasm prints them without
        address and ``;`` (e.g. ``"@P0 ELECT P1, URZ, PT"``), padding NOPs included."""
        return _SASS_LINE.findall(self.sass)

    def opcode_counts(self) -> collections.Counter:
        """SASS mnemonics with their modifiers (e.g. ``UTMALDG.2D``), counted
        per instruction."""
        return collections.Counter(
            _MNEMONIC.match(instruction).group("mnemonic") for instruction in self.instructions()
        )

    def has_instruction(self, prefix: str) -> bool:
        """Whether some SASS mnemonic (with modifiers) starts with ``prefix``."""
        return any(mnemonic.startswith(prefix) for mnemonic in self.opcode_counts())


def entry_name(ptx: str) -> str:
    """The (mangled) name of the kernel entry a PTX module defines."""
    return _ENTRY.search(ptx).group(1)


def find_cuda_tool(name: str) -> pathlib.Path:
    """Path of CUDA tool ``name``: first in ``nvidia/cu13/bin`` of the installed
    nvidia wheels, then ``$CUDA_HOME/bin``, then ``PATH``.

    Raises :class:`ToolNotFoundError` naming the tool and the pip package that
    provides it.
    """
    folders = [str(pathlib.Path(entry) / WHEEL_TOOL_DIR) for entry in _nvidia_wheel_roots()]
    if "CUDA_HOME" in os.environ:
        folders.append(str(pathlib.Path(os.environ["CUDA_HOME"]) / "bin"))
    folders.append(os.environ.get("PATH", ""))
    found = shutil.which(name, path=os.pathsep.join(folders))
    if found is None:
        package = _TOOL_PACKAGES.get(name, "the CUDA toolkit package that ships it")
        raise ToolNotFoundError(
            f"CUDA tool {name!r} not found in the nvidia wheels ({WHEEL_TOOL_DIR}), "
            f"$CUDA_HOME/bin or PATH; it is provided by {package}"
        )
    return pathlib.Path(found)


def _nvidia_wheel_roots():
    """``__path__`` entries of the ``nvidia`` namespace package (none if absent)."""
    try:
        import nvidia
    except ImportError:
        return []
    return list(nvidia.__path__)


def compile_for_sm90a(pyfunc, signature: str, name: str | None = None,
                      launch_bounds=None) -> CompiledKernel:
    """Compile kernel ``pyfunc`` (a Python function or a ``cuda.jit`` dispatcher)
    for ``signature`` (e.g. ``"void(uint32[:], uint64)"``) down to SASS.

    ``name`` labels the result (default: the function's name). ``launch_bounds`` (as
    ``cuda.jit``'s: max threads, min CTAs per SM) defaults to the function's own
    ``launch_bounds`` attribute, so a kernel that sets one compiles here as on the GPU.
    Raises :class:`CudaToolError` with ptxas's stderr when the PTX does not assemble.
    """
    pyfunc = getattr(pyfunc, "py_func", pyfunc)
    if launch_bounds is None:
        launch_bounds = getattr(pyfunc, "launch_bounds", None)
    ptx, _ = cuda.compile(
        pyfunc, signature, device=False, cc=SM90A_CC, output="ptx", abi="numba",
        launch_bounds=launch_bounds,
    )
    entry = entry_name(ptx)
    with tempfile.TemporaryDirectory(prefix="sm90a_") as scratch:
        ptx_path = pathlib.Path(scratch, "kernel.ptx")
        cubin_path = pathlib.Path(scratch, "kernel.cubin")
        ptx_path.write_text(ptx)
        report = _run_tool(
            "ptxas", f"-arch={SM90A_ARCH}", "-v", "-o", str(cubin_path), str(ptx_path)
        )
        sass = _run_tool("nvdisasm", "-c", str(cubin_path))
        cubin = cubin_path.read_bytes()
    return CompiledKernel(
        name=name or pyfunc.__name__, ptx=ptx, cubin=cubin, sass=sass,
        **_parse_resources(report, entry),
    )


def _run_tool(tool, *arguments):
    """Run CUDA tool ``tool``; return its stdout and stderr together."""
    command = [str(find_cuda_tool(tool)), *arguments]
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        raise CudaToolError(
            f"{tool} failed (exit {completed.returncode}): {' '.join(command)}\n"
            f"{completed.stderr}{completed.stdout}"
        )
    return completed.stdout + completed.stderr


def _parse_resources(report, entry):
    """Resource fields of :class:`CompiledKernel` from ``ptxas -v``'s report on ``entry``."""
    name = re.escape(entry)
    frame = re.search(
        rf"Function properties for {name}\s+(\d+) bytes stack frame, "
        r"(\d+) bytes spill stores, (\d+) bytes spill loads",
        report,
    )
    usage = re.search(
        rf"Compiling entry function '{name}'.*?Used (\d+) registers([^\n]*)", report, re.DOTALL
    )
    if frame is None or usage is None:
        raise CudaToolError(f"cannot read the resources of {entry} from ptxas -v:\n{report}")
    shared = re.search(r"(\d+) bytes smem", usage.group(2))
    stack, spill_stores, spill_loads = map(int, frame.groups())
    return dict(
        registers=int(usage.group(1)),
        shared_bytes_static=int(shared.group(1)) if shared else 0,
        stack_frame_bytes=stack,
        spill_store_bytes=spill_stores,
        spill_load_bytes=spill_loads,
    )
