"""What a kernel function compiles from, beyond its source files, as one stable hash.

numba compiles a kernel from its code object, the values its closure holds (device
functions, intrinsics, a variant's parameters) and the module globals it names. The kernel
cache (``tma_kernels.cache``) hashes the source files themselves; this hashes the rest:
each function's bytecode, constants and names, its closure and default values, recursively
through the device functions and intrinsics it holds. A value that has no stable
description (its ``repr`` shows a memory address) makes the function unfingerprintable, and
the cache then compiles it every time rather than risk a wrong hit. The files that define
the functions reached are returned too: the module globals a function names live there.
"""
from __future__ import annotations

import dataclasses
import enum
import hashlib
import types


class Unfingerprintable(ValueError):
    """A value a kernel depends on has no stable description."""


def fingerprint(function) -> tuple[str, frozenset[str]]:
    """(sha256 hex digest of ``function``'s code and of everything its closure holds, the
    source files of every function reached)."""
    files: set[str] = set()
    text = _describe(function, frozenset(), files)
    return hashlib.sha256(text.encode()).hexdigest(), frozenset(files)


def _describe(value, seen: frozenset, files: set) -> str:
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return repr(value)
    if isinstance(value, enum.Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}(" + ",".join(_describe(v, seen, files) for v in value) + ")"
    if isinstance(value, (set, frozenset)):
        return "set(" + ",".join(sorted(_describe(v, seen, files) for v in value)) + ")"
    if isinstance(value, dict):
        items = sorted((_describe(k, seen, files), _describe(v, seen, files)) for k, v in value.items())
        return "dict(" + ",".join(f"{k}:{v}" for k, v in items) + ")"
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    if id(value) in seen:                      # a function reaching itself through its closure
        return "<cycle>"
    seen = seen | {id(value)}
    if isinstance(value, types.FunctionType):
        return _describe_function(value, seen, files)
    if isinstance(value, types.CodeType):
        return _describe_code(value, seen, files)
    if hasattr(value, "py_func"):              # a numba dispatcher (kernel or device function)
        return f"dispatcher[{_describe(value.py_func, seen, files)}]"
    if hasattr(value, "_defn"):                # a numba @intrinsic: its typing-and-codegen function
        return f"intrinsic[{_describe(value._defn, seen, files)}]"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = (f"{f.name}={_describe(getattr(value, f.name), seen, files)}" for f in dataclasses.fields(value))
        return f"{type(value).__qualname__}(" + ",".join(fields) + ")"
    text = repr(value)
    if " at 0x" in text or "object at" in text:
        raise Unfingerprintable(f"{type(value).__qualname__} has no stable description: {text[:80]}")
    return f"{type(value).__module__}.{type(value).__qualname__}:{text}"


def _describe_function(function: types.FunctionType, seen: frozenset, files: set) -> str:
    closure = [cell.cell_contents for cell in (function.__closure__ or ())]
    parts = [f"{function.__module__}.{function.__qualname__}", _describe_code(function.__code__, seen, files),
             _describe(closure, seen, files), _describe(function.__defaults__, seen, files),
             _describe(function.__kwdefaults__, seen, files)]
    return "function(" + "|".join(parts) + ")"


def _describe_code(code: types.CodeType, seen: frozenset, files: set) -> str:
    files.add(code.co_filename)
    constants = ",".join(_describe(c, seen, files) for c in code.co_consts)
    return (f"code({hashlib.sha256(code.co_code).hexdigest()}|{constants}|{code.co_names}"
            f"|{code.co_varnames}|{code.co_freevars})")
