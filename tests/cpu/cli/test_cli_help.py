"""`tma-study --help` explains itself: every command, the paper tier's included, is listed with
a line of help, and every option of every command has help text."""
import subprocess
import sys

from tma_study import cli
from tma_study.cli_help import documented, undocumented


def test_every_command_and_option_has_help_text():
    assert undocumented(documented(cli._parser())) == []


def test_the_top_level_help_lists_every_command_with_its_help():
    parser = documented(cli._parser())
    result = subprocess.run([sys.executable, "-m", "tma_study", "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name in commands:
        assert f"\n    {name} " in result.stdout or f"\n    {name}\n" in result.stdout, name
    assert "claims" in commands and "readme-tables" in commands      # the paper tier's, not deferred


def test_a_command_help_describes_the_command():
    result = subprocess.run([sys.executable, "-m", "tma_study", "aggregate", "--help"], capture_output=True,
                            text=True)
    assert result.returncode == 0 and "derived tables" in result.stdout and "--raw RAW  " in result.stdout
