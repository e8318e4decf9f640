import json

import pytest
from click.testing import CliRunner

from memtui.cli import main
from memtui.core.corpus import prepare_corpus
from memtui.core.secrets import MAX_DEPTH, TOO_DEEP, is_secret_key, mask_metadata, secret_paths
from memtui.core.store import MemoryStore, MemoryStoreError

SECRET = "sess-4f1c9e-supersecret"


@pytest.mark.parametrize(
    "name",
    [
        "password",
        "db_password",
        "secret",
        "client_secret",
        "token",
        "access_token",
        "api_key",
        "apiKey",
        "API-KEY",
        "credentials",
        "session_cookie",
        "Authorization",
        # found missing by the audit
        "auth",
        "jwt",
        "ssh_key",
        "access_key",
        "aws_access_key_id",
        "AWS_SECRET_ACCESS_KEY",
        "signing_key",
        "signingKey",
        "PHPSESSID",
        "JSESSIONID",
        "ASP.NET_SessionId",
        "sessid",
        "session_id",
        "sessionId",
        "passcode",
        "creds",
        "dsn",
        "sentry_dsn",
        "private_key",
        "privateKey",
        "bearer",
        "Bearer-Token",
        # the same families, spelled otherwise
        "X-Auth-Token",
        "basic_auth",
        "basicAuth",
        "auth_header",
        "oauth",
        "X-Api-Key",
        "masterKey",
        "encryption_key",
        "otp",
        "card_pin",
        "connection_string",
        "pass",
        "pass_hash",
    ],
)
def test_secret_looking_names_are_recognised(name):
    assert is_secret_key(name)


@pytest.mark.parametrize(
    "name",
    [
        "param_name",
        "severity",
        "url",
        "tool",
        "passage",
        "bypass_technique",
        # words that contain a short secret word but are not one
        "author",
        "authority",
        "authored_by",
        "author_email",
        "passive",
        "compass",
        "tokenizer",
        "spin",
        "opinion",
        "credit",
        "dsname",
        # keys that are not secret keys; a bare "session" is a conversation's name
        # in the stores memtui opens (its scope, searched as text)
        "key",
        "keys",
        "keyword",
        "monkey",
        "key_id",
        "hostkey",
        "signature",
        "session",
        "session_revision",
        "description",
    ],
)
def test_ordinary_names_are_not(name):
    assert not is_secret_key(name)


def test_masking_stops_at_a_depth_no_walker_overflows_on():
    nested = {"token": "deep-secret"}
    for _ in range(1000):
        nested = {"n": nested}
    masked = mask_metadata({"top": nested})
    assert "deep-secret" not in json.dumps(masked)
    depth, value = 0, masked
    while isinstance(value, dict):
        value, depth = value.get("top", value.get("n")), depth + 1
    assert value == TOO_DEEP and depth == MAX_DEPTH
    assert secret_paths({"top": nested}) == []
    assert secret_paths({"a": [{"token": "t"}]}) == ["a[0].token"]


def test_masking_reaches_nested_fields_and_hides_the_value():
    meta = {"headers": {"Authorization": "Bearer abc"}, "items": [{"token": "t1"}], "url": "u"}
    masked = mask_metadata(meta)
    assert "abc" not in json.dumps(masked) and "t1" not in json.dumps(masked)
    assert masked["url"] == "u"
    assert secret_paths(meta) == ["headers.Authorization", "items[0].token"]


@pytest.fixture
def secret_db(tmp_path):
    path = tmp_path / "s.db"
    with MemoryStore(path) as store:
        store.ingest(
            prepare_corpus(
                [
                    {
                        "tier": "episodic",
                        "record_type": "observation",
                        "content": "login captured",
                        "metadata": {"session_cookie": SECRET, "host": "shop.acme.example"},
                    }
                ]
            )
        )
    return path


def test_json_output_masks_and_reveal_is_audited(secret_db):
    runner = CliRunner()
    listed = runner.invoke(main, ["records", str(secret_db), "--json"]).output
    assert SECRET not in listed
    assert json.loads(listed)[0]["metadata"]["host"] == "shop.acme.example"
    shown = runner.invoke(
        main,
        ["reveal", str(secret_db), "1", "session_cookie", "--reason", "replay check"],
        input="y\n",
    )
    assert shown.exit_code == 0 and SECRET in shown.output
    audit = json.loads(runner.invoke(main, ["audit", str(secret_db), "--json"]).output)
    assert audit[0]["action"] == "reveal" and audit[0]["details"] == {"field": "session_cookie"}
    assert SECRET not in json.dumps(audit)


def test_reveal_refuses_fields_that_are_not_masked(secret_db):
    with MemoryStore(secret_db) as store:
        with pytest.raises(MemoryStoreError, match="no masked field 'host'"):
            store.reveal(1, "host", reason="curious")
        with pytest.raises(MemoryStoreError, match="reason is required"):
            store.reveal(1, "session_cookie", reason="")
        assert [e["action"] for e in store.audit_events()] == ["ingest"]


def test_reveal_asks_first_and_a_no_reveals_nothing(secret_db):
    runner = CliRunner()
    args = ["reveal", str(secret_db), "1", "session_cookie", "--reason", "replay check"]
    declined = runner.invoke(main, args, input="n\n")
    assert declined.exit_code == 1
    assert "Reveal session_cookie of record #1?" in declined.output
    assert SECRET not in declined.output
    with MemoryStore(secret_db) as store:
        assert [e["action"] for e in store.audit_events()] == ["ingest"]
    confirmed = runner.invoke(main, [*args, "--yes"])
    assert confirmed.exit_code == 0 and confirmed.stdout == SECRET + "\n"
    assert "Reveal" not in confirmed.output


def test_reveal_of_a_field_that_is_not_masked_is_refused_before_asking(secret_db):
    runner = CliRunner()
    args = ["reveal", str(secret_db), "1", "no_such_field", "--reason", "replay check"]
    result = runner.invoke(main, args, input="y\n")
    assert result.exit_code == 1
    assert "Reveal" not in result.output  # refused before the question
    assert "has no masked field 'no_such_field'; masked fields: " in result.output
    assert "session_cookie" in result.output
    missing = runner.invoke(main, ["reveal", str(secret_db), "999", "x", "--reason", "r"])
    assert missing.exit_code == 1 and "no record with id 999" in missing.output
    with MemoryStore(secret_db) as store:
        assert [e["action"] for e in store.audit_events()] == ["ingest"]
