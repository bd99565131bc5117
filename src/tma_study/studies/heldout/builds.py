"""Each case's two kernels as Triton compiles them: sources, signatures, specialisations.

A build is compiled with ``triton.compile`` for sm_90a (no GPU needed), the same call in the
compile step (which fills Triton's cache, ``build/triton-cache``, and checks the SASS) and in the
measure step (which finds it there). Integer arguments and pointers marked divisible by 16 are
specialised so, as Triton's JIT would for the values given: the launch asserts that they are.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tma_study.config import REPO_ROOT

CACHE_DIR = REPO_ROOT / "build" / "triton-cache"
TRITON_TYPES = {"bf16": "bf16", "fp8_e4m3": "fp8e4nv"}
VARIANTS = ("tma", "pointer")
SASS_COUNTED = ("UTMALDG", "LDGSTS", "LDG", "HGMMA", "QGMMA", "HMMA")
C = "constexpr"


@dataclass(frozen=True)
class Build:
    case: str                      # the case's key
    variant: str                   # tma | pointer
    kernel: str                    # the Triton function's name in kernels/heldout/<module>.py
    module: str
    signature: dict                # argument -> Triton type ("*bf16", "i32", "tensordesc<...>", "constexpr")
    constants: dict                # constexpr argument -> value
    divisible: tuple               # argument names specialised as divisible by 16
    warps: int
    stages: int

    @property
    def name(self) -> str:
        return f"{self.case}/{self.variant}"


def _gemm(case, variant):
    p, t = case.params, TRITON_TYPES[case["dtype"]]
    const = {"BLOCK_M": p["block_m"], "BLOCK_N": p["block_n"], "BLOCK_K": p["block_k"], "STAGES": p["stages"], "GROUP": 8}
    ints = {"M": "i32", "N": "i32", "K": "i32"}
    if variant == "tma":
        sig = {"a_desc": f"tensordesc<{t}[{p['block_m']}, {p['block_k']}]>",
               "b_desc": f"tensordesc<{t}[{p['block_n']}, {p['block_k']}]>", "c_ptr": "*bf16", **ints}
        return "gemm_tma", sig, const, ("c_ptr", "M", "N", "K")
    sig = {"a_ptr": f"*{t}", "b_ptr": f"*{t}", "c_ptr": "*bf16", **ints}
    return "gemm_pointer", sig, const, ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K")


def _attention(case, variant):
    p = case.params
    const = {"D": p["head_dim"], "BLOCK_M": p["block_m"], "BLOCK_N": p["block_n"], "STAGES": p["stages"],
             "CAUSAL": p["causal"]}
    tail = {"o_ptr": "*bf16", "N_CTX": "i32", "qk_scale": "fp32"}
    if variant == "tma":
        desc = f"tensordesc<bf16[{p['block_n']}, {p['head_dim']}]>"
        return "attention_tma", {"q_ptr": "*bf16", "k_desc": desc, "v_desc": desc, **tail}, const, \
            ("q_ptr", "o_ptr", "N_CTX")
    return "attention_pointer", {"q_ptr": "*bf16", "k_ptr": "*bf16", "v_ptr": "*bf16", **tail}, const, \
        ("q_ptr", "k_ptr", "v_ptr", "o_ptr", "N_CTX")


def _paged_decode(case, variant):
    p, t = case.params, TRITON_TYPES[case["dtype"]]
    const = {"Q_HEADS": p["q_heads"], "KV_HEADS": p["kv_heads"], "GROUP_PAD": p["group_pad"], "D": p["head_dim"],
             "PAGE": p["page_size"], "STAGES": p["stages"]}
    tail = {"table_ptr": "*i32", "o_ptr": "*bf16", "qk_scale": "fp32", "PAGES_PER_SEQ": "i32"}
    if variant == "tma":
        desc = f"tensordesc<{t}[{p['page_size']}, {p['head_dim']}]>"
        return "decode_tma", {"q_ptr": "*bf16", "k_desc": desc, "v_desc": desc, **tail}, const, \
            ("q_ptr", "table_ptr", "o_ptr", "PAGES_PER_SEQ")
    return "decode_pointer", {"q_ptr": "*bf16", "k_ptr": f"*{t}", "v_ptr": f"*{t}", **tail}, const, \
        ("q_ptr", "k_ptr", "v_ptr", "table_ptr", "o_ptr", "PAGES_PER_SEQ")


def _gather(case, variant):
    p = case.params
    const = {"ROWS": p["rows_per_cta"], "D": p["row_elements"], "STAGES": p["stages"]}
    if variant == "tma":
        return "gather_tma", {"table_desc": f"tensordesc<bf16[1, {p['row_elements']}]>", "index_ptr": "*i32",
                              "out_ptr": "*bf16"}, const, ("index_ptr", "out_ptr")
    return "gather_pointer", {"table_ptr": "*bf16", "index_ptr": "*i32", "out_ptr": "*bf16"}, const, \
        ("table_ptr", "index_ptr", "out_ptr")


FAMILY_BUILDS = {"gemm": _gemm, "attention": _attention, "paged_decode": _paged_decode, "gather": _gather}


def builds(case) -> list[Build]:
    out = []
    for variant in VARIANTS:
        kernel, sig, const, divisible = FAMILY_BUILDS[case.family](case, variant)
        out.append(Build(case.key, variant, kernel, case.family, {**sig, **{k: C for k in const}}, const,
                         divisible, case["warps"], case["stages"]))
    return out


def _function(build: Build):
    import importlib
    return getattr(importlib.import_module(f"tma_kernels.heldout.{build.module}"), build.kernel)


def compile_build(build: Build):
    """The Triton CompiledKernel of ``build`` for sm_90a (from Triton's cache where it is there)."""
    os.environ.setdefault("TRITON_CACHE_DIR", str(CACHE_DIR))
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    fn = _function(build)
    names = list(build.signature)
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in build.divisible}
    source = ASTSource(fn, signature=build.signature, constexprs=build.constants, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": build.warps, "num_stages": build.stages})


def _cuobjdump() -> str:
    import triton
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    return str(bundled) if bundled.is_file() else "cuobjdump"


def resources(compiled) -> dict:
    """Registers, shared memory and the count of each SASS instruction of SASS_COUNTED."""
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        sass = subprocess.run([_cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
        usage = subprocess.run([_cuobjdump(), "-res-usage", str(cubin)], capture_output=True, text=True,
                               check=True).stdout
    registers = int(re.search(r"REG:(\d+)", usage).group(1))
    counts = {f"sass_{op.lower()}": len(re.findall(rf"\b{op}\b", sass)) for op in SASS_COUNTED}
    return {"registers": registers, "shared_bytes": int(compiled.metadata.shared), **counts}
