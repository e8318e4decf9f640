"""Masking metadata fields whose names look like secrets.

Agents store what they capture: session cookies, API keys, passwords. Every
view and every ``--json`` output shows such fields masked unless the operator
reveals one explicitly, and each reveal is audited (``MemoryStore.reveal``).
"""

from __future__ import annotations

import re
from typing import Any

# Names that hold a secret wherever they appear in a field name, even run
# together with other words ("clientsecret", "PHPSESSID", "x-auth-token").
SECRET_NAME = re.compile(
    r"passw(or)?d|passphrase|passcode|pwd|secret|token(?!iz)|credential|cookie|authori[sz]ation"
    r"|api[_-]?key|apikey|priv(ate)?[_-]?key|bearer|jwt|sess(ion)?[_-]?id|sessid"
    r"|connection[_-]?string",
    re.IGNORECASE,
)
# Short words that are secrets only as a whole word of the name: "auth" but not
# "author" or "authority", "pass" but not "passage" or "bypass".
SECRET_WORDS = frozenset(
    {"pass", "auth", "oauth", "basicauth", "creds", "cred", "dsn", "otp", "totp", "pin"}
)
# "<kind> key" (any separator or none): aws_access_key_id, ssh_key, signingKey, masterkey.
KEY_KINDS = (
    "access|api|app|auth|client|consumer|crypto|deploy|enc|encryption|gpg|hmac|license"
    "|master|pgp|priv|private|root|rsa|secret|session|sign|signing|ssh"
)
_KEY = re.compile(rf"(?:{KEY_KINDS})keys?")
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")

MASK = "••••••••"


def is_secret_key(name: str) -> bool:
    """Whether a metadata field name looks like it holds a secret.

    Masking a harmless field costs an audited reveal; showing a secret cannot be
    undone. So the rules lean to masking, but not on every word that merely
    contains a short one (``author``, ``passage``, ``monkey`` stay visible).
    """
    if SECRET_NAME.search(name):
        return True
    words = [w.lower() for w in _WORDS.findall(name)]
    if any(w in SECRET_WORDS or _KEY.fullmatch(w) for w in words):
        return True
    pairs = zip(words, words[1:], strict=False)
    return any(_KEY.fullmatch(a + b) for a, b in pairs)


def masked_value(value: Any) -> str:
    """What a masked field shows: never the value, nor its length."""
    return f"{MASK} (masked)"


#: how deep masking looks; anything deeper is shown as ``TOO_DEEP`` (secrets included)
MAX_DEPTH = 64
TOO_DEEP = "… (nested too deep to show)"


def mask_metadata(metadata: Any, *, path: str = "", _depth: int = 0) -> Any:
    """A copy of ``metadata`` with every secret-named field masked, at any depth.

    Past ``MAX_DEPTH`` levels (which memtui's ingest refuses, but another
    store may hold) the rest is replaced by ``TOO_DEEP``: nothing below is
    shown, so nothing secret below can leak, and no walker recurses too far.
    """
    if isinstance(metadata, dict | list) and _depth >= MAX_DEPTH:
        return TOO_DEEP
    if isinstance(metadata, dict):
        out: dict[str, Any] = {}
        for key, value in metadata.items():
            where = f"{path}.{key}" if path else str(key)
            if is_secret_key(str(key)) and value not in (None, "", [], {}):
                out[key] = masked_value(value)
            else:
                out[key] = mask_metadata(value, path=where, _depth=_depth + 1)
        return out
    if isinstance(metadata, list):
        return [
            mask_metadata(item, path=f"{path}[{i}]", _depth=_depth + 1)
            for i, item in enumerate(metadata)
        ]
    return metadata


def secret_paths(metadata: Any, *, path: str = "", _depth: int = 0) -> list[str]:
    """Dotted paths of every secret-named field that holds a value (within ``MAX_DEPTH``)."""
    found: list[str] = []
    if _depth >= MAX_DEPTH:
        return found
    if isinstance(metadata, dict):
        for key, value in metadata.items():
            where = f"{path}.{key}" if path else str(key)
            if is_secret_key(str(key)) and value not in (None, "", [], {}):
                found.append(where)
            else:
                found.extend(secret_paths(value, path=where, _depth=_depth + 1))
    elif isinstance(metadata, list):
        for i, item in enumerate(metadata):
            found.extend(secret_paths(item, path=f"{path}[{i}]", _depth=_depth + 1))
    return found


_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_OPEN_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?')
_JSON_SCALAR = re.compile(r"[^,}\]]*")


def mask_json_text(text: str) -> str:
    """JSON text that may not parse, with the value of every secret-named field masked.

    For metadata shown as raw text because it cannot be read as an object: a
    quoted name followed by ``:`` is a field; when the name looks secret, its
    value (a string, a bracketed object or list, or a bare word, each possibly
    cut short) becomes the mask, whatever follows it.
    """
    out: list[str] = []
    position = 0
    scan = 0
    while (found := _JSON_STRING.search(text, scan)) is not None:
        scan = found.end()
        colon = scan
        while colon < len(text) and text[colon].isspace():
            colon += 1
        if colon >= len(text) or text[colon] != ":" or not is_secret_key(found.group()[1:-1]):
            continue
        start = colon + 1
        while start < len(text) and text[start].isspace():
            start += 1
        end = _json_value_end(text, start)
        if end == start:
            continue
        out.append(text[position:start])
        out.append(f'"{masked_value(None)}"')
        position = scan = end
    out.append(text[position:])
    return "".join(out)


def _json_value_end(text: str, start: int) -> int:
    """Where the JSON value at ``start`` ends (the end of ``text`` when it is cut short)."""
    if start >= len(text):
        return start
    first = text[start]
    if first == '"':
        match = _OPEN_STRING.match(text, start)
        return match.end() if match else len(text)
    if first not in "[{":
        match = _JSON_SCALAR.match(text, start)
        return match.end() if match else start
    depth = 0
    position = start
    while position < len(text):
        char = text[position]
        if char == '"':
            match = _OPEN_STRING.match(text, position)
            position = match.end() if match else len(text)
            continue
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return position + 1
        position += 1
    return len(text)


def value_at(metadata: Any, dotted: str) -> Any:
    """The value at a path produced by ``secret_paths``; KeyError if absent."""
    current = metadata
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", dotted):
        if part.startswith("["):
            index = int(part[1:-1])
            if not isinstance(current, list) or index >= len(current):
                raise KeyError(dotted)
            current = current[index]
        else:
            if not isinstance(current, dict) or part not in current:
                raise KeyError(dotted)
            current = current[part]
    return current
