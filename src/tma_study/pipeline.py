"""Where the pipeline's files live: the Snakemake rules ask this module, tests can too.

Nothing here runs a job; it maps (config, studies, results label) to paths.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import gpu as gpu_mod

TABLE_FORMATS = ("tex", "md")
FIGURE_FORMATS = ("pdf", "png")
RERUN_SUFFIX = "-rerun"


class MissingDataError(FileNotFoundError):
    """Analysis asked for raw data that is neither committed nor measured here."""


def results_label(config: dict, detect=gpu_mod.detect, majors=(gpu_mod.HOPPER_MAJOR,)) -> str:
    """results/<label>/: the reference data, or a new measurement's own folder.

    ``majors``: the compute-capability majors some requested study can measure on. Raises
    GpuRequirementError (before any work) when measure=true cannot run here.
    """
    if not config["measure"]:
        return config["reference_gpu"]
    info = gpu_mod.require_architecture(detect(), tuple(majors))
    label = config.get("results_label") or info.slug
    if label == config["reference_gpu"] and not config.get("overwrite_reference", False):
        label += RERUN_SUFFIX  # never replace the committed reference unless asked
    return label


@dataclass(frozen=True)
class Layout:
    studies: dict           # name -> Study, the ones the config asks for
    label: str              # results/<label>/ is read (and, when measuring, written)
    root: Path = Path(".")

    @property
    def results(self) -> str:
        return f"results/{self.label}"

    def figure_study(self) -> dict[str, str]:
        return {fig: name for name, study in self.studies.items() for fig in study.figures}

    def raw_files(self, study: str) -> list[str]:
        names = (*self.studies[study].raw_files, "provenance.json")
        return [f"{self.results}/{study}/{name}" for name in names]

    def repeat_files(self, study: str) -> list[str]:
        """Raw data of a second run of the same sweep (results/<label>-rerun/), when present."""
        repeat = [f"results/{self.label}{RERUN_SUFFIX}/{study}/{f}" for f in self.studies[study].raw_files]
        return repeat if all((self.root / f).exists() for f in repeat) else []

    def derived_files(self, study: str) -> list[str]:
        return [f"{self.results}/{study}/derived/{f}" for f in self.studies[study].derived_files]

    def code_files(self, study: str) -> list[str]:
        """The study's Python code and the shared report code: editing them reruns the analysis."""
        files = sorted((self.root / "src/tma_study/studies" / study).glob("*.py"))
        files += sorted((self.root / "src/tma_study/report").glob("*.py"))
        return [str(f.relative_to(self.root)) for f in files]

    def kernel_code_files(self, study: str) -> list[str]:
        """The code that decides which kernels the compile step builds and checks for ``study``."""
        files = ["src/tma_study/harness/kernel_builds.py", "src/tma_study/compile_report.py"]
        return files + [f"src/tma_study/studies/{study}/kernels.py"]

    def table_files(self, study: str) -> list[str]:
        return [f"paper/tables/{t}.{ext}" for t in self.studies[study].tables for ext in TABLE_FORMATS]

    def kernel_table_files(self, study: str) -> list[str]:
        return [f"paper/tables/{study}_kernels.{ext}" for ext in TABLE_FORMATS]

    def all_outputs(self) -> list[str]:
        outputs = []
        for name, study in self.studies.items():
            outputs += self.derived_files(name)
            outputs += [f"figures/{fig}.{ext}" for fig in study.figures for ext in FIGURE_FORMATS]
            outputs += self.table_files(name) + self.kernel_table_files(name)
        return outputs + self.paper_outputs()

    # ------------------------------------------------------------ other runs, claims, paper

    def overlay_labels(self, study: str) -> list[str]:
        """Other results/<label>/ folders with a complete run of ``study``: figures overlay them."""
        names = (*self.studies[study].raw_files, "provenance.json")
        return sorted(folder.parent.name for folder in (self.root / "results").glob(f"*/{study}")
                      if folder.parent.name != self.label and all((folder / n).is_file() for n in names))

    def overlay_derived_files(self, study: str) -> list[str]:
        """The derived files of every other run of ``study`` (made by the overlay aggregate rules)."""
        return [f"results/{label}/{study}/derived/{f}" for label in self.overlay_labels(study)
                for f in self.studies[study].derived_files]

    def comparison_files(self, study: str) -> list[str]:
        """paper/tables/<study>_comparison.*: what moved between runs (studies with ``compare``)."""
        if self.studies[study].compare is None:
            return []
        return [f"paper/tables/{study}_comparison.{ext}" for ext in TABLE_FORMATS]

    def claims_files(self) -> list[str]:
        return [f"{self.results}/claims.tsv", f"{self.results}/claims.md"]

    def paper_outputs(self) -> list[str]:
        """What the paper tier makes without TeX: claims, rules of thumb, macros, comparisons."""
        outputs = self.claims_files()
        outputs += [f"paper/tables/{name}.{ext}" for name in ("rules_of_thumb", "rules_refuted") for ext in TABLE_FORMATS]
        outputs += ["paper/generated/macros.tex", "paper/generated/studies.tex", "paper/generated/claims.tex",
                    "paper/generated/projection.tex"]
        return outputs + [f for name in self.studies for f in self.comparison_files(name)]

    def measurable_on(self, major: int) -> tuple[Layout, list[str]]:
        """This layout minus the studies that cannot measure on a GPU of this compute-capability
        major (e.g. the Hopper-only studies on a B200), and their names."""
        skipped = [name for name, study in self.studies.items() if major not in study.architectures]
        kept = {name: study for name, study in self.studies.items() if name not in skipped}
        return Layout(kept, self.label, self.root), skipped

    def without_absent_optional_studies(self) -> tuple[Layout, list[str]]:
        """This layout minus the studies that allow it and have no raw data at all, and their names."""
        def absent(name):
            return not any((self.root / f).exists() for f in self.raw_files(name))
        skipped = [name for name, study in self.studies.items()
                   if study.skip_analysis_without_data and absent(name)]
        kept = {name: study for name, study in self.studies.items() if name not in skipped}
        return Layout(kept, self.label, self.root), skipped

    def check_raw_data_present(self) -> None:
        """Raise MissingDataError naming every raw file that analysis needs and lacks (the
        kernels the data were measured with included: the kernel tables read them)."""
        needed = [f"{self.results}/{study}/{name}" for study, s in self.studies.items() for name in s.measured_files]
        missing = [f for f in needed if not (self.root / f).exists()]
        if missing:
            raise MissingDataError(
                "analysis needs raw data that is not here: " + ", ".join(missing) + ". Restore the "
                "committed reference data (git checkout -- results/) or measure on a Hopper GPU "
                "with --config measure=true.")
