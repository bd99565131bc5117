"""The on-disk kernel cache that lets paged_kv compile its kernels in parallel processes.

Without a GPU nothing compiles, so these check the two keys: the cache folder follows the
kernel sources (numba's own key misses edits to called device functions), and an entry's
key follows the caller's key, not the closure (whose pickle differs between processes,
which made every process miss on the H200)."""
from pathlib import Path
from types import SimpleNamespace

from tma_kernels.jit_cache import keyed_cache

from tma_study.harness import parallel_compile

CODEGEN = SimpleNamespace(magic_tuple=lambda: ("nvptx64-nvidia-cuda", "sm_90a", ""))


def _factory(inner_value):
    def helper():             # a new function object per call, as the kernel factories make
        return inner_value

    def kernel(out):
        out[0] = helper()
    return kernel


def test_entry_key_follows_the_given_key_not_the_closure():
    a, b = _factory(1), _factory(1)
    assert a.__closure__[0].cell_contents is not b.__closure__[0].cell_contents
    key_a = keyed_cache(a, "Variant(stages=2)")._index_key(("sig",), CODEGEN)
    key_b = keyed_cache(b, "Variant(stages=2)")._index_key(("sig",), CODEGEN)
    other = keyed_cache(a, "Variant(stages=4)")._index_key(("sig",), CODEGEN)
    assert key_a == key_b
    assert key_a != other


def test_cache_folder_follows_the_kernel_sources(tmp_path: Path):
    kernels = tmp_path / "kernels"
    (kernels / "paged_kv").mkdir(parents=True)
    source = kernels / "paged_kv" / "consumer.py"
    source.write_text("X = 1\n")
    first = parallel_compile.cache_dir(kernels)
    assert parallel_compile.cache_dir(kernels) == first
    source.write_text("X = 2\n")
    assert parallel_compile.cache_dir(kernels) != first
    assert first.parent == parallel_compile.CACHE_ROOT


def declines_odd(item):
    """A compile function for warm(): builds even items, declines odd ones (returns False)."""
    return item % 2 == 0


def test_warm_returns_the_items_its_function_declined(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(parallel_compile, "use_cache_dir", lambda path: None)   # numba's cache untouched
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    declined = parallel_compile.warm(f"{__name__}:declines_odd", [1, 2, 3, 4], tmp_path, workers=1)
    assert declined == [1, 3]
