# Other runs beside this one (results/<label>/<study>/ of another GPU or a repeat): their
# derived data, so figures can overlay them and a table can say what moved. One aggregate
# rule per (study, other run), generated from what is on disk.
import re

for _name, _study in STUDIES.items():
    for _label in LAYOUT.overlay_labels(_name):

        rule:
            name:
                f"aggregate_{_name}_run_{re.sub(r'[^A-Za-z0-9]', '_', _label)}"
            input:
                raw=[
                    f"results/{_label}/{_name}/{f}"
                    for f in (*_study.raw_files, "provenance.json")
                ],
                read=LAYOUT.overlay_read_raw_files(_name, _label),
                code=LAYOUT.code_files(_name),
                checked=CHECKED,  # the first job's report (checks.smk)
            output:
                [f"results/{_label}/{_name}/derived/{f}" for f in _study.derived_files],
            log:
                f"logs/aggregate/{_label}/{_name}.log",
            params:
                python=PYTHON,
                raw=lambda wildcards, input: Path(input.raw[0]).parent,
                derived=lambda wildcards, output: Path(output[0]).parent,
                study=_name,
                # content, not clocks (common.smk)
                sealed=sealed_digest(
                    [
                        f"results/{_label}/{_name}/provenance.json",
                        *LAYOUT.overlay_read_raw_files(_name, _label),
                    ]
                ),
            shell:
                "{params.python} -m tma_study aggregate {params.study:q} --raw {params.raw:q} "
                "--out {params.derived:q} > {log:q} 2>&1"

    if _study.compare is not None:

        rule:
            name:
                f"compare_{_name}"
            input:
                reference=LAYOUT.derived_files(_name),
                others=LAYOUT.overlay_derived_files(_name),
                code=LAYOUT.code_files(_name),
                # the default comparison reads the study's claims (tma_study.report.claim_compare)
                claims=[f for f in [f"config/claims/{_name}.yaml"] if Path(f).is_file()],
            output:
                LAYOUT.comparison_files(_name),
            log:
                f"logs/compare/{_name}.log",
            params:
                python=PYTHON,
                runs=" ".join(
                    f"--run {shlex.quote(f'{label}=results/{label}/{_name}/derived')}"
                    for label in [LABEL, *LAYOUT.overlay_labels(_name)]
                ),
                study=_name,
                reference=LABEL,
                tables=lambda wildcards, output: Path(output[0]).parent,
            shell:
                "{params.python} -m tma_study compare {params.study:q} --reference {params.reference:q} "
                "{params.runs} --out {params.tables:q} > {log:q} 2>&1"
