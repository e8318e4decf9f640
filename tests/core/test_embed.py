import math
import textwrap

import pytest

from memtui.core.embed import (
    HASH_MAX_DIM,
    Embedder,
    EmbedderError,
    HashEmbedder,
    builtin_embedder,
    embedder_spec,
    resolve_embedder,
)


def test_hash_embedder_is_deterministic_across_calls_and_instances():
    text = "Time-based blind SQL injection against the items API"
    first = HashEmbedder()([text])[0]
    assert HashEmbedder()([text])[0] == first
    assert HashEmbedder().embed_one(text) == first
    assert HashEmbedder()([text, "other words"])[0] == first


def test_hash_embedder_is_l2_normalised_and_keeps_vocabulary_not_case():
    vector = HashEmbedder().embed_one("alpha beta gamma alpha")
    assert math.sqrt(sum(v * v for v in vector)) == pytest.approx(1.0, abs=1e-12)
    assert HashEmbedder().embed_one("ALPHA Beta gamma alpha") == vector
    assert HashEmbedder().embed_one("alpha beta gamma delta") != vector


def test_text_without_words_embeds_to_the_zero_vector():
    assert HashEmbedder(16).embed_one("... --- !!!") == [0.0] * 16


@pytest.mark.parametrize("dim", [8, 64, 300])
def test_dimension_is_respected_and_named(dim):
    embedder = HashEmbedder(dim)
    assert (embedder.dim, embedder.name) == (dim, f"hash-{dim}")
    assert [len(v) for v in embedder(["a b c", ""])] == [dim, dim]
    assert isinstance(embedder, Embedder)


def test_too_small_a_dimension_is_refused():
    with pytest.raises(EmbedderError, match="at least 8"):
        HashEmbedder(4)


@pytest.mark.parametrize("name", [None, "", "none", " None "])
def test_none_resolves_to_no_embedder(name):
    assert resolve_embedder(name) is None


def test_hash_names_resolve_to_the_builtin_embedder():
    default = resolve_embedder("hash")
    assert isinstance(default, HashEmbedder) and default.dim == 256
    small = resolve_embedder("hash-64")
    assert isinstance(small, HashEmbedder)
    assert (small.name, small.dim) == ("hash-64", 64)


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """A tiny importable module holding an embedder, a factory and two non-embedders."""
    (tmp_path / "memtui_test_plugin.py").write_text(
        textwrap.dedent(
            """
            class Tiny:
                name = "tiny-3"
                dim = 3

                def __call__(self, texts):
                    return [[float(len(t)), 1.0, 0.0] for t in texts]

            instance = Tiny()

            def factory():
                return Tiny()

            def bad_factory():
                return 42

            def raising_factory():
                raise RuntimeError("weights missing")

            NOT_CALLABLE = 3

            class Broken:
                name = "broken-3"
                dim = 3

                def __call__(self, texts):
                    raise RuntimeError("model weights missing")

            broken = Broken()

            class Wrong:
                name = "wrong-3"
                dim = 3

                def __call__(self, texts):
                    return [[1.0, 2.0] for t in texts]

            wrong = Wrong()

            def exits():
                raise SystemExit(0)

            def gives_a_class():
                return Tiny
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return "memtui_test_plugin"


def test_module_callable_uses_an_embedder_object_as_is(plugin_module):
    embedder = resolve_embedder(f"{plugin_module}:instance")
    assert (embedder.name, embedder.dim) == ("tiny-3", 3)
    assert embedder(["abcd"]) == [[4.0, 1.0, 0.0]]


def test_module_callable_calls_a_factory(plugin_module):
    embedder = resolve_embedder(f"{plugin_module}:factory")
    assert embedder.name == "tiny-3"
    assert embedder(["ab"]) == [[2.0, 1.0, 0.0]]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("word2vec", "unknown embedder 'word2vec'"),
        ("hash-x", "unknown embedder"),
        ("memtui_no_such_module_zz:thing", "cannot import embedder module"),
        ("{mod}:missing", "has no attribute 'missing'"),
        ("{mod}:NOT_CALLABLE", "neither an embedder nor a factory"),
        ("{mod}:bad_factory", "did not give an embedder"),
        ("{mod}:raising_factory", "weights missing"),
    ],
)
def test_unknown_or_broken_names_raise_embedder_error(plugin_module, name, message):
    with pytest.raises(EmbedderError, match=message):
        resolve_embedder(name.format(mod=plugin_module))


def test_a_class_is_instantiated_not_used_as_an_embedder(plugin_module):
    embedder = resolve_embedder(f"{plugin_module}:Tiny")
    assert not isinstance(embedder, type)
    assert (embedder.name, embedder.dim) == ("tiny-3", 3)
    assert embedder(["abc"]) == [[3.0, 1.0, 0.0]]  # a call embeds; it does not build a Tiny
    assert isinstance(embedder, Embedder)
    assert embedder.spec == f"{plugin_module}:Tiny" and embedder_spec(embedder) == embedder.spec


@pytest.mark.parametrize(
    ("attr", "message"),
    [("gives_a_class", "did not give an embedder"), ("exits", "SystemExit")],
)
def test_a_factory_must_build_an_instance_and_cannot_exit(plugin_module, attr, message):
    with pytest.raises(EmbedderError, match=message):
        resolve_embedder(f"{plugin_module}:{attr}")


def test_builtin_names_never_import_and_the_hash_dimension_is_capped(tmp_path, monkeypatch):
    (tmp_path / "memtui_test_sideeffect.py").write_text(
        f"open({str(tmp_path / 'imported')!r}, 'w').close()\ndef x():\n    return None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert builtin_embedder("memtui_test_sideeffect:x") is None
    assert builtin_embedder("hash-64").name == "hash-64"
    assert not (tmp_path / "imported").exists()
    with pytest.raises(EmbedderError, match=f"at most {HASH_MAX_DIM}"):
        builtin_embedder("hash-100000000")
    with pytest.raises(EmbedderError, match=f"at most {HASH_MAX_DIM}"):
        builtin_embedder("hash-" + "9" * 5000)
    with pytest.raises(EmbedderError, match=f"at most {HASH_MAX_DIM}"):
        resolve_embedder(f"hash-{HASH_MAX_DIM + 1}")
    assert resolve_embedder(f"hash-{HASH_MAX_DIM}").dim == HASH_MAX_DIM
