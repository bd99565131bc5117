# The measure tier: only with --config measure=true, on a Hopper GPU. A study measures into
# build/measure/ first; only a complete run is published into results/<label>/<study>/, so an
# interrupted measurement never touches data already in results/.

if MEASURE:

    rule measure:
        input:
            config="build/config/{study}.json",
            resources="build/compile/{study}/resources.csv",  # compiled and SASS-checked before GPU time
        output:
            staged=directory(f"build/measure/{LABEL}/{{study}}"),
        log:
            f"logs/measure/{LABEL}/{{study}}.log",
        resources:
            gpu=1,
        params:
            python=PYTHON,
        shell:
            "{params.python} -m tma_study measure {wildcards.study:q} --config {input.config:q} "
            "--out {output.staged:q} 2>&1 | tee {log:q}"

    for _name, _study in STUDIES.items():

        rule:
            name:
                f"publish_{_name}"
            input:
                staged=f"build/measure/{LABEL}/{_name}",
            output:
                [f"{RESULTS}/{_name}/{f}" for f in _study.measured_files],
            log:
                f"logs/publish/{LABEL}/{_name}.log",
            params:
                python=PYTHON,
                destination=f"{RESULTS}/{_name}",
            shell:
                "{params.python} -m tma_study publish --staged {input.staged:q} --out {params.destination:q} "
                "> {log:q} 2>&1"
