"""The README's command line examples run, and print what the README shows.

Every ```text block of README.md with ``$ `` lines is a session: ``$ export K=V``
sets the environment, ``$ memtui ...`` runs the command (in a scratch folder
where ``sample_corpus/`` is the repository's), and the lines up to the next
``$`` are its expected output, compared line by line (trailing spaces aside) at
``README_COLUMNS`` columns. When output changes on purpose, regenerate the
examples: ``python tests/project/test_readme_examples.py --write`` runs every block again
and writes what the commands print now into README.md.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_COLUMNS = "100"
BLOCK = re.compile(r"^```text\n(.*?)^```", re.S | re.M)


def sessions(text: str) -> list[list[tuple[str, list[str]]]]:
    """Each block with ``$`` lines: its commands, each with the output lines that follow it."""
    found = []
    for block in BLOCK.findall(text):
        steps: list[tuple[str, list[str]]] = []
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
        if steps:
            found.append(steps)
    return found


def run(command: str, env: dict[str, str]) -> list[str]:
    from memtui.cli import main

    words = shlex.split(command)
    assert words[0] == "memtui", command
    result = CliRunner().invoke(main, words[1:], env=env)
    assert result.exit_code == 0, f"$ {command}\n{result.output}"
    return [line.rstrip() for line in result.stdout.splitlines()]


def replay(steps: list[tuple[str, list[str]]], env: dict[str, str]) -> list[tuple[str, list[str]]]:
    """Run a session's commands; each with what it prints now."""
    printed = []
    for command, _ in steps:
        if command.startswith("export "):
            key, _, value = command.removeprefix("export ").partition("=")
            env[key] = value
            printed.append((command, []))
        else:
            printed.append((command, run(command, env)))
    return printed


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    (tmp_path / "sample_corpus").symlink_to(ROOT / "sample_corpus")
    monkeypatch.chdir(tmp_path)
    return {"COLUMNS": README_COLUMNS, "MEMTUI_OPERATOR": "readme"}


def test_the_readme_has_the_search_and_lanes_sessions():
    commands = [command for steps in sessions(README.read_text()) for command, _ in steps]
    assert "export MEMTUI_NOW=2026-11-30T12:00:00Z" in commands
    assert any(c.startswith("memtui ingest sample_corpus/") for c in commands)
    assert any(c.startswith("memtui search sample.db") and "--explain" in c for c in commands)
    lanes = [c for c in commands if c.startswith("memtui lanes sample.db")]
    assert lanes and "--profile" in lanes[0] and "--engagement" in lanes[0]


def test_readme_examples_print_what_the_readme_shows(scratch):
    env = dict(scratch)
    for steps in sessions(README.read_text()):
        for (command, shown), (_, now) in zip(steps, replay(steps, env), strict=True):
            shown = [line.rstrip() for line in shown]
            while shown and not shown[-1]:
                shown.pop()
            assert shown == now, (
                f"README output of `$ {command}` is out of date; "
                "regenerate it with `python tests/project/test_readme_examples.py --write`"
            )


def regenerate(text: str) -> str:
    """``text`` (the README) with each example block as its commands print it now."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "sample_corpus").symlink_to(ROOT / "sample_corpus")
        here = os.getcwd()
        os.chdir(folder)
        try:
            env = {"COLUMNS": README_COLUMNS, "MEMTUI_OPERATOR": "readme"}

            def block(match: re.Match[str]) -> str:
                steps = sessions(match.group(0))
                if not steps:
                    return match.group(0)
                lines = ["```text"]
                for command, printed in replay(steps[0], env):
                    if len(lines) > 1 and lines[-1] and not lines[-1].startswith("$ "):
                        lines.append("")  # a blank line after a command's output
                    lines.append(f"$ {command}")
                    lines.extend(printed)
                return "\n".join(lines) + "\n```"

            return BLOCK.sub(block, text)
        finally:
            os.chdir(here)


if __name__ == "__main__":
    # python tests/project/test_readme_examples.py [--write]: print (or write) the README with its
    # examples regenerated.
    updated = regenerate(README.read_text())
    if "--write" in sys.argv[1:]:
        README.write_text(updated)
    else:
        sys.stdout.write(updated)
