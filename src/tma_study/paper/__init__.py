"""The paper tier: what the paper and the README say, made from the studies' derived data.

- ``claims``, ``claim_checks``, ``claim_files``  every claim of config/claims/ (read and
                                validated by claim_files) checked against the data
                                (results/<label>/claims.tsv and claims.md)
- ``catalog``, ``catalog_counts``  the data-movement catalog (catalog/*.yaml): its tables and
                                the counts its claims check
- ``rules_of_thumb``            paper/tables/rules_of_thumb.*: each study's rules, kept while
                                their claims pass
- ``macros``, ``projection``    paper/generated/macros.tex: every number of the text; the
                                labelled B200 projection
- ``generated``                 paper/generated/*.tex and the comparison tables between runs
- ``pdf``                       paper/main.pdf (latexmk) and the checks of what a reader sees
- ``readme``                    the README's generated tables
- ``cli``                       the tier's ``tma-study`` commands

Each study contributes through its optional entry points (``Study.rules``, ``macros``,
``compare``); the studies never import this package.
"""
