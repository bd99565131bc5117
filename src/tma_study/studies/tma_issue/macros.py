"""The tma_issue study's numbers for the paper's text (entry point ``macros``). Every name is
written out in full here, so that ``grep`` finds where a macro comes from."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from tma_study.report.numbers import number, ratio


def _chase(derived_dir: Path) -> dict[str, str]:
    chase = pd.read_csv(derived_dir / "chase.csv")
    out = {}
    for level, name in (("l2", "Ltwo"), ("hbm", "Hbm")):
        rows = chase[chase.level == level]
        cycles = rows.groupby("form").cycles_per_hop_median
        for form, short in (("tma_tile", "Tma"), ("bulk_copy", "Bulk"), ("plain_indexed", "PlainIndexed"),
                            ("plain_minimal", "PlainMinimal")):
            out[f"tmaIssueChase{short}{name}Min"] = number(cycles.min()[form])
            out[f"tmaIssueChase{short}{name}Max"] = number(cycles.max()[form])
        tma = rows[rows.form == "tma_tile"].cycles_minus_plain_minimal
        out[f"tmaIssueChaseTmaOverMinimal{name}Min"] = number(tma.min())
        out[f"tmaIssueChaseTmaOverMinimal{name}Max"] = number(tma.max())
        indexed = rows[rows.form == "plain_indexed"].cycles_minus_plain_minimal
        out[f"tmaIssueChaseIndexOverMinimal{name}Max"] = number(indexed.max())
        spread = rows.fraction_of_smallest_working_set
        out[f"tmaIssueChaseWorkingSetRatio{name}Max"] = ratio(spread.max())
    out["tmaIssueChaseWorkingSets"] = ", ".join(f"{b >> 20}" for b in sorted(chase.working_set_bytes.unique()))
    return out


def _issue_rate(derived_dir: Path) -> dict[str, str]:
    rate = pd.read_csv(derived_dir / "issue_rate.csv")
    out = {"tmaIssueRateInFlightKib": number(rate.in_flight_bytes_per_sm.max() / 1024),
           "tmaIssueRateThreadsMin": number(rate.issue_threads.min()),
           "tmaIssueRateThreadsMax": number(rate.issue_threads.max())}
    for mechanism, short in (("tma_tile", "Tma"), ("bulk_copy", "Bulk")):
        for size, word in ((16, "Sixteen"), (256, "TwoFiftySix"), (1024, "OneKib"), (4096, "FourKib")):
            rows = rate[(rate.mechanism == mechanism) & (rate.bytes_per_transfer == size)]
            if rows.empty:
                continue
            one = rows[rows.issue_threads == 1]
            best = rows.loc[rows.transfers_per_sm_per_us.idxmax()]
            out[f"tmaIssueRate{short}{word}OneThread"] = number(one.transfers_per_sm_per_us.iloc[0], 1) if len(one) else "n/a"
            out[f"tmaIssueRate{short}{word}Best"] = number(best.transfers_per_sm_per_us, 1)
            out[f"tmaIssueRate{short}{word}BestThreads"] = number(best.issue_threads)
            out[f"tmaIssueRate{short}{word}BestCycles"] = number(best.sm_cycles_per_transfer, 1)
            out[f"tmaIssueRate{short}{word}BestGbps"] = number(best.gbps)
            out[f"tmaIssueRate{short}{word}OneThreadShare"] = ratio(one.fraction_of_best_threads.iloc[0]) if len(one) else "n/a"
    return out


def macros(derived_dir: Path, provenance: dict) -> dict[str, str]:
    derived_dir = Path(derived_dir)
    return {"tmaIssueConfigurations": number(provenance.get("configurations", float("nan"))),
            **_chase(derived_dir), **_issue_rate(derived_dir)}
