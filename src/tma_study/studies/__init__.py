"""Study declarations, discovered by scanning this package.

A study is a subpackage ``tma_study.studies.<name>`` exposing ``STUDY`` (a
:class:`~tma_study.studies.base.Study`). Adding a study means adding files: its kernels
under ``kernels/<name>/``, this subpackage, ``workflow/schemas/studies/<name>.schema.yaml``,
its notebooks under ``notebooks/`` and its section in ``config/config.yaml``. Nothing
central is edited: the Snakefile builds its rules from what is discovered here.
"""
from __future__ import annotations

import importlib
import pkgutil

from .base import Study


def discover() -> dict[str, Study]:
    """{name: Study} for every study subpackage of this package."""
    studies = {}
    for module in pkgutil.iter_modules(__path__):
        if not module.ispkg:
            continue
        study = importlib.import_module(f"{__name__}.{module.name}").STUDY
        if study.name != module.name:
            raise ValueError(f"study package {module.name!r} declares name {study.name!r}")
        studies[study.name] = study
    return studies
