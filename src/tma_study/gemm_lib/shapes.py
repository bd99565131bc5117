"""The GEMM problem sizes of the sweep: square problems and LLM projection layers.

A projection layer y = x · Wᵀ with x of ``tokens`` rows and W of N×K (out × in features) is
exactly the ABI's D = A · Bᵀ with M = tokens. Layers that share an (N, K) shape (q and o,
k and v, gate and up) are one entry of the config, named after all of them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Shape:
    family: str        # "square" or the model, e.g. "llama3_8b"
    layer: str         # "square" or the projection(s), e.g. "gate_up"
    m: int
    n: int
    k: int

    @property
    def key(self) -> str:
        return f"{self.family}/{self.layer}/m{self.m}n{self.n}k{self.k}"

    @property
    def flop(self) -> int:
        return 2 * self.m * self.n * self.k

    def columns(self) -> dict:
        return {"shape": self.key, "family": self.family, "layer": self.layer,
                "m": self.m, "n": self.n, "k": self.k, "flop": self.flop}


def shapes(study: dict) -> list[Shape]:
    """Every problem size of the config, square ones first, in a stable order."""
    section = study["shapes"]
    out = [Shape("square", "square", s, s, s) for s in section["square"]]
    for name, (n, k) in section["projections"].items():
        family, _, layer = name.partition("/")
        out += [Shape(family, layer, tokens, n, k) for tokens in section["tokens"]]
    return out
