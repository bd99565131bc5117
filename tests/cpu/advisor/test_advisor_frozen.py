"""The advisor's rule files are a registered version: a change to them without a new entry fails here."""
from tma_study.advisor import frozen


def test_the_rule_files_hash_to_a_registered_version():
    version = frozen.current_version()
    assert version["sha256"] == frozen.current_sha256()


def test_versions_count_up_and_never_share_a_hash():
    versions = frozen.versions()
    numbers = [v["version"] for v in versions]
    assert numbers == sorted(numbers) and len(set(numbers)) == len(numbers)
    assert len({v["sha256"] for v in versions}) == len(versions)
    assert all(v.get("registered_utc") and v.get("note") for v in versions)


def test_a_changed_rule_file_is_not_a_registered_version(tmp_path):
    for name in frozen.RULE_FILES:
        (tmp_path / name).write_bytes((frozen.HERE / name).read_bytes())
    (tmp_path / "rules.py").write_text((frozen.HERE / "rules.py").read_text() + "\n# tuned after the data\n")
    assert frozen.current_sha256(tmp_path) not in {v["sha256"] for v in frozen.versions()}
