# The measure tier: only with --config measure=true, on a Hopper GPU. A study measures into
# build/measure/ first; only a complete run is published into results/<label>/<study>/, so an
# interrupted measurement never touches data already in results/.
# Each measure job asks for one GPU (resource gpu: `--resources gpu=N` runs N at once here, a
# cluster executor requests one GPU per job) and claims a free one itself (tma_study.harness.gpu_lock).
# With config measure_gpus, one job per study and GPU kind, each asking for its GPU model.
import re

if MEASURE:
    MEASURE_TARGET = {target.label: target for target in MEASURE_TARGETS}

    rule measure:
        input:
            config="build/config/{study}.json",
            resources="build/compile/{study}/resources.csv",  # compiled and SASS-checked before GPU time
        output:
            staged=directory("build/measure/{label}/{study}"),
        log:
            "logs/measure/{label}/{study}.log",
        benchmark:
            "logs/benchmark/measure/{label}/{study}.tsv"
        wildcard_constraints:
            label="|".join(re.escape(label) for label in MEASURE_TARGET),
        priority: schedule.MEASURE_PRIORITY  # before any ready compile job: the GPU waits least
        resources:
            gpu=1,
            gpu_model=lambda wildcards: MEASURE_TARGET[wildcards.label].gpu_model,  # None: any GPU
        params:
            python=PYTHON,
            expect=lambda wildcards: (
                f"--expect-gpu {shlex.quote(MEASURE_TARGET[wildcards.label].slug)}"
                if MEASURE_TARGET[wildcards.label].slug
                else ""
            ),
        shell:
            "{params.python} -m tma_study measure {wildcards.study:q} --config {input.config:q} "
            "--out {output.staged:q} {params.expect} 2>&1 | tee {log:q}"

    for _label in MEASURE_TARGET:
        # publish_<study> for results/<LABEL>/, publish_<study>_<label> for a cluster's other GPUs
        _suffix = (
            "" if _label == LABEL else f"_{re.sub(r'[^A-Za-z0-9]', '_', _label)}"
        )
        for _name, _study in STUDIES.items():

            rule:
                name:
                    f"publish_{_name}{_suffix}"
                input:
                    staged=f"build/measure/{_label}/{_name}",
                output:
                    [f"results/{_label}/{_name}/{f}" for f in _study.measured_files],
                log:
                    f"logs/publish/{_label}/{_name}.log",
                params:
                    python=PYTHON,
                    destination=f"results/{_label}/{_name}",
                shell:
                    "{params.python} -m tma_study publish --staged {input.staged:q} --out {params.destination:q} "
                    "> {log:q} 2>&1"
