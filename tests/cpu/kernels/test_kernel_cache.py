"""The content-addressed kernel cache (tma_kernels.cache): what its key follows, that an entry
is found again (also by another function object of the same kernel), that a refused build is
remembered, and that a kernel it cannot describe is compiled and never stored."""
import threading

import pytest
from tma_kernels import build, cache
from tma_kernels.fingerprint import Unfingerprintable, fingerprint

SIGNATURE = "void(uint32[::1])"


def _factory(value):
    def helper():             # a new function object per call, as the kernel factories make
        return value

    def kernel(out):
        out[0] = helper()
    return kernel


def _fake_compiled(name):
    return build.CompiledKernel(name=name, ptx=".visible .entry k(\n", cubin=b"\x7fELF", sass="  /*0000*/ EXIT ;",
                                registers=8, shared_bytes_static=0, stack_frame_bytes=0,
                                spill_store_bytes=0, spill_load_bytes=0)


@pytest.fixture
def compiles(monkeypatch):
    """Record the names compile_for_sm90a is asked for, returning a fake build."""
    asked = []

    def fake(function, signature, name=None, launch_bounds=None):
        asked.append(name)
        return _fake_compiled(name)
    monkeypatch.setattr(cache, "compile_for_sm90a", fake)
    return asked


def test_key_follows_the_closure_values_not_the_function_objects(tmp_path):
    kernels = cache.KernelCache(tmp_path)
    a, b, other = _factory(1), _factory(1), _factory(2)
    assert a.__closure__[0].cell_contents is not b.__closure__[0].cell_contents
    assert kernels.key("k", a, SIGNATURE) == kernels.key("k", b, SIGNATURE)
    assert kernels.key("k", a, SIGNATURE) != kernels.key("k", other, SIGNATURE)
    assert kernels.key("k", a, SIGNATURE) != kernels.key("k", a, "void(uint64[::1])")
    assert kernels.key("k", a, SIGNATURE) != kernels.key("k", a, SIGNATURE, launch_bounds=(128, 2))
    assert kernels.key("k", a, SIGNATURE) != kernels.key("k2", a, SIGNATURE)


def test_key_follows_the_toolkit_sources(tmp_path, monkeypatch):
    kernels_root = tmp_path / "kernels"
    kernels_root.mkdir()
    (kernels_root / "consumer.py").write_text("X = 1\n")
    monkeypatch.setattr(cache, "KERNELS_ROOT", kernels_root)
    cache.toolkit_digest.cache_clear()
    first = cache.KernelCache(tmp_path / "c").key("k", _factory(1), SIGNATURE)
    (kernels_root / "consumer.py").write_text("X = 2\n")
    cache.toolkit_digest.cache_clear()
    try:
        assert cache.KernelCache(tmp_path / "c").key("k", _factory(1), SIGNATURE) != first
    finally:
        monkeypatch.undo()
        cache.toolkit_digest.cache_clear()


def test_an_entry_is_compiled_once_then_found(tmp_path, compiles):
    kernels = cache.KernelCache(tmp_path)
    first = kernels.compile("k", _factory(1), SIGNATURE)
    again = cache.KernelCache(tmp_path).compile("k", _factory(1), SIGNATURE)   # another process's view
    assert compiles == ["k"]
    assert again == first
    assert kernels.stats.compiled == 1
    assert "hit rate" in kernels.stats.line()


def test_an_unreadable_entry_is_compiled_again(tmp_path, compiles):
    kernels = cache.KernelCache(tmp_path)
    kernels.compile("k", _factory(1), SIGNATURE)
    key = kernels.key("k", _factory(1), SIGNATURE)
    (tmp_path / key[:2] / key / "meta.json").write_text("{not json")
    kernels.compile("k", _factory(1), SIGNATURE)
    assert compiles == ["k", "k"]


def test_a_refused_build_is_remembered(tmp_path, monkeypatch):
    calls = []

    def refuse(function, signature, name=None, launch_bounds=None):
        calls.append(name)
        raise build.CudaToolError("ptxas: register target too low")
    monkeypatch.setattr(cache, "compile_for_sm90a", refuse)
    for _ in range(2):
        with pytest.raises(build.CudaToolError, match="register target too low"):
            cache.KernelCache(tmp_path).compile("k", _factory(1), SIGNATURE)
    assert calls == ["k"]
    assert cache.KernelCache(tmp_path).lookup("k", _factory(1), SIGNATURE) == "ptxas: register target too low"


def test_a_kernel_holding_an_object_without_a_stable_description_is_never_stored(tmp_path, compiles):
    lock = threading.Lock()          # repr shows an address

    def kernel(out):
        out[0] = lock.locked()
    with pytest.raises(Unfingerprintable):
        fingerprint(kernel)
    kernels = cache.KernelCache(tmp_path)
    kernels.compile("k", kernel, SIGNATURE)
    kernels.compile("k", kernel, SIGNATURE)
    assert compiles == ["k", "k"]
    assert kernels.stats.uncacheable == 2
    assert not any(tmp_path.iterdir())


def test_a_real_kernel_round_trips_through_the_cache(tmp_path):
    from numba import cuda

    @cuda.jit(device=True, inline=True)
    def twice(x):
        return x * 2

    def kernel(out):
        out[0] = twice(out[0])
    kernels = cache.KernelCache(tmp_path)
    compiled = kernels.compile("twice", kernel, SIGNATURE)
    found = cache.KernelCache(tmp_path).lookup("twice", kernel, SIGNATURE)
    assert found == compiled
    assert found.has_instruction("EXIT")
    assert found.registers == compiled.registers


def test_a_cached_build_becomes_a_dispatcher_without_compiling(tmp_path):
    """tma_kernels.loaded wraps the cached PTX and cubin as numba's own cache does (no GPU needed
    to build it; launching it loads that cubin): one overload of the compiled signature, the
    entry the PTX defines, and no further compiles."""
    from tma_kernels.loaded import load

    def kernel(out):
        out[0] = 7
    compiled = cache.KernelCache(tmp_path).compile("seven", kernel, SIGNATURE)
    dispatcher = load(compiled, SIGNATURE)
    (overload,) = dispatcher.overloads.values()
    assert overload.entry_name == build.entry_name(compiled.ptx)
    assert [str(t) for t in overload.signature.args] == ["array(uint32, 1d, C)"]
    assert overload.library.get_asm_str(build.SM90A_CC) == compiled.ptx
    assert dispatcher.__name__ == "seven" and not dispatcher._can_compile
