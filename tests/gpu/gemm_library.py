"""The SM90 GEMM library a GPU test needs: build/gemm/libgemm_sm90.so when the compile step
(`snakemake build/compile/gemm/resources.csv`) made it with the test's variants, otherwise those variants compiled here (nvcc,
one thread per variant: under a minute each) and linked into a library of their own."""
from concurrent.futures import ThreadPoolExecutor

from tma_study.gemm_lib import abi
from tma_study.gemm_lib import build as B
from tma_study.studies.gemm import measure as M
from tma_study.gemm_lib import variants as V


def sm90_library(tmp_path_factory, names: list[str]) -> abi.GemmLibrary:
    built = M.library_path("sm90")
    if built.exists():
        lib = abi.GemmLibrary(built)
        try:
            for name in names:
                lib.variant(name)
            return lib
        except KeyError:
            pass
    out = tmp_path_factory.mktemp("gemm-gpu")

    def one(name):
        source = out / f"{name}.cu"
        source.write_text(V.render_source(V.parse_name(name)))
        B.compile_variant(name, source, out / f"{name}.o")
        return out / f"{name}.o"

    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        objects = list(pool.map(one, names))
    B.link(objects, out / "libgemm_sm90_test.so")
    return abi.GemmLibrary(out / "libgemm_sm90_test.so")
