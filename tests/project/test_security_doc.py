"""SECURITY.md says what the commands do: audit verify's checks, and where reveal applies."""

from __future__ import annotations

import re
import sqlite3

from click.testing import CliRunner
from conftest import ROOT
from fixtures.sources_support import LETTA, copy_fixture

from memtui.cli import main

TEXT = " ".join((ROOT / "SECURITY.md").read_text().split())


def test_audit_verify_is_described_as_it_behaves(sample_db):
    assert "checks the chain only" not in TEXT
    assert "`memtui audit verify DB --head HEAD`" in TEXT
    quoted = re.search(
        r"\(`(the newest events were deleted \(the log ends at #\d+, [^`]+)`\)", TEXT
    )
    assert quoted, "SECURITY.md quotes what audit verify prints for deleted newest events"
    runner = CliRunner()
    assert runner.invoke(main, ["compact", str(sample_db)]).exit_code == 0
    conn = sqlite3.connect(sample_db)
    conn.execute("DROP TRIGGER IF EXISTS audit_events_no_delete")
    conn.execute("DELETE FROM audit_events WHERE id = 2")
    conn.commit()
    conn.close()
    result = runner.invoke(main, ["audit", "verify", str(sample_db)])
    assert result.exit_code == 1
    printed = result.output.strip().removeprefix("Error: audit chain broken: ")
    shape = re.sub(r"#\d+", "#N", quoted.group(1))
    assert re.sub(r"#\d+", "#N", printed) == shape


def test_reveal_is_said_to_be_for_memtui_databases_only(tmp_path):
    assert "Reveal is for memtui databases only" in TEXT
    letta = copy_fixture(LETTA, tmp_path)
    result = CliRunner().invoke(
        main, ["reveal", str(letta), "archival:x", "secret", "--reason", "r", "--yes"]
    )
    assert result.exit_code == 1 and "reveal is not supported" in result.output
