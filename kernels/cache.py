"""A content-addressed cache of compiled kernels: each kernel is compiled once per machine.

One folder per build, ``<root>/<key[:2]>/<key>/``: ``kernel.ptx``, ``kernel.cubin``,
``kernel.sass`` and ``meta.json`` (name, signature, launch bounds, ptxas resources), or
``failed.txt`` where ptxas refused the build (a register cap too low, say), so a refusal is
not compiled again either. The key hashes everything the build depends on:

- the kernel's name, signature and launch bounds, and the target (sm_90a);
- the toolchain: numba-cuda, llvmlite, NVVM, ptxas and nvdisasm versions;
- every source file of the kernel toolkit (``kernels/**/*.py``) and the file defining any
  function the kernel reaches outside it (a test's own kernel);
- the kernel function's code and closure (``tma_kernels.fingerprint``).

The compile step, the tests' SASS checks and the measure step all go through
:meth:`KernelCache.compile`; on a GPU, :func:`tma_kernels.loaded.load` turns an entry into a
launchable numba kernel without compiling again. A kernel whose closure cannot be
fingerprinted is compiled every time and never stored.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .build import (
    SM90A_ARCH,
    CompiledKernel,
    CudaToolError,
    compile_for_sm90a,
    find_cuda_tool,
)
from .fingerprint import Unfingerprintable, fingerprint

KERNELS_ROOT = Path(__file__).resolve().parent
CACHE_FORMAT = 1
_PACKAGES = ("numba-cuda", "llvmlite", "nvidia-nvvm")


@functools.cache
def toolchain() -> dict[str, str]:
    """The versions a compiled kernel depends on (packages, ptxas, nvdisasm, target arch)."""
    found = {}
    for name in _PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    for tool in ("ptxas", "nvdisasm"):
        output = subprocess.run([str(find_cuda_tool(tool)), "--version"], capture_output=True, text=True).stdout
        found[tool] = output.strip().splitlines()[-1]
    found["arch"] = SM90A_ARCH
    found["cache_format"] = str(CACHE_FORMAT)
    return found


@functools.cache
def toolkit_digest() -> str:
    """sha256 over every ``kernels/**/*.py`` (path and content)."""
    digest = hashlib.sha256()
    for path in sorted(KERNELS_ROOT.rglob("*.py")):
        digest.update(str(path.relative_to(KERNELS_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _file_digest(path: str) -> str:
    """sha256 of a source file outside the toolkit ('-' for one that does not exist)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "-"


@dataclasses.dataclass
class CacheStats:
    hits: int = 0
    compiled: int = 0
    uncacheable: int = 0

    def line(self) -> str:
        looked_up = self.hits + self.compiled
        rate = f"{100 * self.hits / looked_up:.0f} %" if looked_up else "n/a"
        extra = f", {self.uncacheable} not cacheable (compiled)" if self.uncacheable else ""
        return f"kernel cache: {self.hits} hits, {self.compiled} compiled (hit rate {rate}){extra}"


class KernelCache:
    """Compiled kernels under ``root``, keyed by what they are built from."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.stats = CacheStats()

    def key(self, name: str, function, signature: str, launch_bounds=None) -> str:
        """The entry's key; raises Unfingerprintable where the function's closure has no
        stable description."""
        function = getattr(function, "py_func", function)
        if launch_bounds is None:
            launch_bounds = getattr(function, "launch_bounds", None)
        code, files = fingerprint(function)
        outside = sorted(f for f in files if not Path(f).resolve().is_relative_to(KERNELS_ROOT))
        parts = {"name": name, "signature": signature, "launch_bounds": repr(launch_bounds),
                 "code": code, "toolkit": toolkit_digest(), "toolchain": toolchain(),
                 "files": {f: _file_digest(f) for f in outside}}
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

    def lookup(self, name: str, function, signature: str, launch_bounds=None) -> CompiledKernel | str | None:
        """The stored build (or the stored refusal's message), None where there is none; counts
        a hit, compiles nothing."""
        try:
            folder = self._folder(self.key(name, function, signature, launch_bounds))
        except Unfingerprintable:
            return None
        cached = _read_entry(folder)
        if cached is not None:
            self.stats.hits += 1
        return cached

    def _folder(self, key: str) -> Path:
        return self.root / key[:2] / key

    def compile(self, name: str, function, signature: str, launch_bounds=None) -> CompiledKernel:
        """``function`` compiled for sm_90a (as tma_kernels.build.compile_for_sm90a), from the
        cache where an entry exists, else compiled and stored. A refused build raises
        CudaToolError, from the cache too."""
        try:
            key = self.key(name, function, signature, launch_bounds)
        except Unfingerprintable:
            self.stats.uncacheable += 1
            return compile_for_sm90a(function, signature, name=name, launch_bounds=launch_bounds)
        folder = self._folder(key)
        cached = _read_entry(folder)
        if cached is not None:
            self.stats.hits += 1
            if isinstance(cached, str):
                raise CudaToolError(cached)
            return cached
        self.stats.compiled += 1
        try:
            compiled = compile_for_sm90a(function, signature, name=name, launch_bounds=launch_bounds)
        except CudaToolError as error:
            _write_entry(folder, {"failed.txt": str(error).encode()})
            raise
        meta = {**{f.name: getattr(compiled, f.name) for f in dataclasses.fields(compiled)
                   if f.name not in ("ptx", "cubin", "sass")},
                "signature": signature, "launch_bounds": repr(launch_bounds), "toolchain": toolchain()}
        _write_entry(folder, {"kernel.ptx": compiled.ptx.encode(), "kernel.cubin": compiled.cubin,
                              "kernel.sass": compiled.sass.encode(), "meta.json": json.dumps(meta).encode()})
        return compiled


def _read_entry(folder: Path) -> CompiledKernel | str | None:
    """The entry in ``folder``: a CompiledKernel, the refusal's message, or None (no entry)."""
    if (folder / "failed.txt").is_file():
        return (folder / "failed.txt").read_text()
    try:
        meta = json.loads((folder / "meta.json").read_text())
        fields = {f.name for f in dataclasses.fields(CompiledKernel)}
        return CompiledKernel(ptx=(folder / "kernel.ptx").read_text(), cubin=(folder / "kernel.cubin").read_bytes(),
                              sass=(folder / "kernel.sass").read_text(),
                              **{k: v for k, v in meta.items() if k in fields})
    except (OSError, ValueError, TypeError):
        return None                            # absent or unreadable: compile again


def _write_entry(folder: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into a fresh folder beside ``folder``, then rename it into place (a
    concurrent writer of the same entry wins or loses whole; both wrote the same build)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
    try:
        for name, data in files.items():
            (scratch / name).write_bytes(data)
        os.chmod(scratch, 0o755)
        os.rename(scratch, folder)
    except OSError:
        shutil.rmtree(scratch, ignore_errors=True)   # another process stored it first
