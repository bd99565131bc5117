"""Kernels of the ``tma_issue`` study: what one TMA transfer costs from issue to arrival, against a
minimal plain load, over working sets of several sizes (:mod:`.chase`), and how many TMA-engine
copies one SM issues per unit of time (:mod:`.issue_rate`)."""
from .chase import CHASE_SIGNATURE, FORMS, RESULT_WORDS, chase_dynamic_shared_bytes, chase_kernel  # noqa: F401
from .issue_rate import ISSUE_RATE_SIGNATURE, MECHANISMS, issue_rate_dynamic_shared_bytes, issue_rate_kernel  # noqa: F401
