"""Paged-KV attention forward for the ``paged_kv`` study (kernel.py has the layouts).

One kernel per :class:`~.geometry.Variant`; the load path (``tma`` or ``cp_async``) is
the only difference a ``diff producers.py`` shows between two otherwise equal variants, and the
consumer (``Variant.score_layout``) one file of the ladder layouts.py lists:
consumer_qk.py, consumer_kq.py, consumer_kq_wgmma.py, consumer_kq_wgmma_rs_lazy.py and
consumer_kq_wgmma_rs_lazy_rowsplit.py, each a step up from the one before it (the steps they share:
consumer_steps.py, kq_steps.py and kernel_steps.py). Import the
names from their modules (layouts.py, the consumer list, compiles nothing).
"""
