# The main job's first job: every run the analysis reads (this label's and the other runs it
# overlays), checked as the analysis reads it: raw files as sealed by their provenance.json, which
# names the GPU of its folder and a commit of this repository, each file following its study's
# schema (tma_study.harness.run_checks). Every rule that reads raw data, and the catalog, takes its
# report as input, so a refusal stops the main job before any output is written. New raw data
# rerun it and so every analysis job after it (not ancient(): Snakemake would then skip a job's
# own reasons to rerun). Not in a measure run (its data are checked where they are published).
CHECKED_RUNS = (
    []
    if MEASURE
    else [
        (name, f"results/{label}/{name}")
        for name in STUDIES
        for label in [LABEL, *LAYOUT.overlay_labels(name)]
    ]
)
CHECKED = [f"build/checked/{LABEL}.txt"] if CHECKED_RUNS else []

if CHECKED_RUNS:

    rule check_raw_data:
        input:
            raw=[
                f"{folder}/{file}"
                for name, folder in CHECKED_RUNS
                for file in (*STUDIES[name].raw_files, "provenance.json")
            ],
            schemas=[
                f"src/tma_study/studies/{name}/raw_schema.yaml" for name in STUDIES
            ],
        output:
            f"build/checked/{LABEL}.txt",
        log:
            f"logs/check/{LABEL}.log",
        threads: 64  # Snakemake scales this down to the cores it is given (-c)
        params:
            python=PYTHON,
            runs=" ".join(
                f"--run {shlex.quote(f'{name}={folder}')}"
                for name, folder in CHECKED_RUNS
            ),
            # content, not clocks (common.smk)
            sealed=sealed_digest(
                [f"{folder}/provenance.json" for _, folder in CHECKED_RUNS]
            ),
        # the refusal (one line naming file, row and column) is shown, not only logged
        shell:
            "{params.python} -m tma_study check-runs {params.runs} --workers {threads} "
            "--out {output:q} 2> {log:q} || {{ cat {log:q} >&2; exit 1; }}"
