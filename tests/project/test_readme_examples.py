"""The command line examples of README.md and docs/*.md run, and print what they show.

Every ```text block of a document with ``$ `` lines is a session: ``$ export K=V``
sets the environment, ``$ memtui ...`` runs the command (in a scratch folder
where ``sample_corpus/`` is the repository's), and the lines up to the next
``$`` are its expected output, compared line by line (trailing spaces aside) at
``README_COLUMNS`` columns. Each document runs on its own (its own scratch folder
and environment), its blocks in order, so a page's examples build what they use.
When output changes on purpose, regenerate the examples:
``python tests/project/test_readme_examples.py --write [FILE...]`` runs every block
again and writes what the commands print now into each document (or only FILE).
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
DOCS = ROOT / "docs"
README_COLUMNS = "100"
BLOCK = re.compile(r"^```text\n(.*?)^```", re.S | re.M)


def documents() -> list[Path]:
    """README.md, then every page of docs/ (by name)."""
    return [README, *sorted(DOCS.glob("*.md"))]


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


def fresh_environment() -> dict[str, str]:
    return {"COLUMNS": README_COLUMNS, "MEMTUI_OPERATOR": "readme"}


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    (tmp_path / "sample_corpus").symlink_to(ROOT / "sample_corpus")
    monkeypatch.chdir(tmp_path)
    return fresh_environment()


def commands_of(path: Path) -> list[str]:
    return [command for steps in sessions(path.read_text()) for command, _ in steps]


def test_the_docs_have_the_search_and_lanes_sessions():
    search = commands_of(DOCS / "search.md")
    assert "export MEMTUI_NOW=2026-11-30T12:00:00Z" in search
    assert any(c.startswith("memtui ingest sample_corpus/") for c in search)
    assert any(c.startswith("memtui search sample.db") and "--explain" in c for c in search)
    lanes_page = commands_of(DOCS / "lanes.md")
    assert "export MEMTUI_NOW=2026-11-30T12:00:00Z" in lanes_page
    assert any(c.startswith("memtui ingest sample_corpus/") for c in lanes_page)
    lanes = [c for c in lanes_page if c.startswith("memtui lanes sample.db")]
    assert lanes and "--profile" in lanes[0] and "--engagement" in lanes[0]


@pytest.mark.parametrize(
    "document",
    [path for path in documents() if sessions(path.read_text())],
    ids=lambda path: str(path.relative_to(ROOT)),
)
def test_examples_print_what_the_docs_show(document, scratch):
    env = dict(scratch)
    for steps in sessions(document.read_text()):
        for (command, shown), (_, now) in zip(steps, replay(steps, env), strict=True):
            shown = [line.rstrip() for line in shown]
            while shown and not shown[-1]:
                shown.pop()
            assert shown == now, (
                f"{document.relative_to(ROOT)}: output of `$ {command}` is out of date; "
                "regenerate it with `python tests/project/test_readme_examples.py --write`"
            )


def regenerate(text: str) -> str:
    """``text`` (one document) with each example block as its commands print it now."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "sample_corpus").symlink_to(ROOT / "sample_corpus")
        here = os.getcwd()
        os.chdir(folder)
        try:
            env = fresh_environment()

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
    # python tests/project/test_readme_examples.py [--write] [FILE...]: print (or write) each
    # document (README.md and docs/*.md, or only the FILEs given) with its examples regenerated.
    sys.path.insert(0, str(ROOT))
    arguments = sys.argv[1:]
    write = "--write" in arguments
    chosen = [Path(a).resolve() for a in arguments if a != "--write"]
    for document in chosen or documents():
        text = document.read_text()
        if not sessions(text):
            continue
        updated = regenerate(text)
        if write:
            if updated != text:
                document.write_text(updated)
                print(f"rewrote {document.relative_to(ROOT)}", file=sys.stderr)
        else:
            sys.stdout.write(updated)
