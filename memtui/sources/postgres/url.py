"""A Postgres URL as memtui takes it in place of a store PATH, and its redacted form.

memtui hands the URL to libpq (through psycopg) as it was given, so every libpq
form works: TCP (``postgresql://user@db.example:5432/agents``), a socket
(``postgresql:///agents?host=/run/postgresql``), a service
(``postgresql://?service=agents``), several hosts, and the password from the URL,
``PGPASSWORD`` or ``~/.pgpass``. This module only reads the URL, to show it.

The password never leaves this module: ``PgTarget.display`` (what labels,
``--json``, errors and the audit log show) has no password, and ``scrub`` takes
it (and any other ``password=``) out of a message a driver wrote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, unquote, urlencode

SCHEMES = ("postgresql", "postgres")
DEFAULT_SCHEMA = "public"
HIDDEN = "***"

_URL = re.compile(r"^(postgres(?:ql)?)://", re.IGNORECASE)
_SECRET_PARAMS = frozenset({"password", "sslpassword"})
# A password in a DSN a driver may quote back: key=value and URL userinfo forms.
_PASSWORD_PAIR = re.compile(r"((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)
_USERINFO = re.compile(r"(postgres(?:ql)?://[^:/@\s]*):[^@\s]*@", re.IGNORECASE)


def is_postgres_url(text: object) -> bool:
    """Whether ``text`` is a ``postgresql://`` or ``postgres://`` URL."""
    return isinstance(text, str) and _URL.match(text.strip()) is not None


@dataclass(frozen=True)
class PgTarget:
    """One Postgres store to open: the URL as given (never shown) and the schema."""

    url: str = field(repr=False)
    schema: str = DEFAULT_SCHEMA

    def __post_init__(self) -> None:
        if not is_postgres_url(self.url):
            raise ValueError("a Postgres URL starts with postgresql:// or postgres://")

    @property
    def password(self) -> str | None:
        """The password the URL itself holds (None: libpq finds it, if there is one)."""
        userinfo = _split(self.url)[1]
        if userinfo is not None and ":" in userinfo:
            return unquote(userinfo.split(":", 1)[1])
        for key, value in _query(self.url):
            if key == "password":
                return value
        return None

    @property
    def display(self) -> str:
        """The URL without its password (``postgresql://ana@db.example/agents``)."""
        return redact(self.url)

    @property
    def display_with_schema(self) -> str:
        """The URL and the schema when it is not ``public``: how the store is named."""
        if self.schema == DEFAULT_SCHEMA:
            return self.display
        return f"{self.display} (schema {self.schema})"

    def scrub(self, text: str) -> str:
        """``text`` (a driver's message) with this URL's password taken out."""
        return scrub(text, self.url)


def _split(url: str) -> tuple[str, str | None, str, str]:
    """``(scheme, userinfo or None, hosts, rest)`` of a URL (rest: path, query, fragment)."""
    text = url.strip()
    match = _URL.match(text)
    assert match is not None
    scheme = match.group(1)
    body = text[match.end() :]
    cut = min((i for i in (body.find("/"), body.find("?"), body.find("#")) if i >= 0), default=-1)
    netloc, rest = (body, "") if cut < 0 else (body[:cut], body[cut:])
    userinfo: str | None = None
    if "@" in netloc:
        userinfo, netloc = netloc.rsplit("@", 1)
    return scheme, userinfo, netloc, rest


def _query(url: str) -> list[tuple[str, str]]:
    rest = _split(url)[3]
    if "?" not in rest:
        return []
    query = rest.split("?", 1)[1].split("#", 1)[0]
    return parse_qsl(query, keep_blank_values=True)


def redact(url: str) -> str:
    """``url`` without a password: none in the user part, no ``password=`` parameter."""
    scheme, userinfo, hosts, rest = _split(url)
    user = ""
    if userinfo is not None:
        name = userinfo.split(":", 1)[0]
        user = f"{name}@" if name else ""
    path, _, query = rest.partition("?")
    query, hash_mark, fragment = query.partition("#")
    if query:
        kept = [
            (key, value)
            for key, value in parse_qsl(query, keep_blank_values=True)
            if key.lower() not in _SECRET_PARAMS
        ]
        query = urlencode(kept, safe="/", quote_via=quote)
    shown = f"{scheme}://{user}{hosts}{path}"
    if query:
        shown += f"?{query}"
    return shown + (hash_mark + fragment if hash_mark else "")


def scrub(text: str, url: str | None = None) -> str:
    """``text`` with every password taken out: the URL's own (as given and decoded), any
    ``password=...`` pair and any ``scheme://user:password@`` a message quotes."""
    out = str(text)
    if url:
        out = out.replace(url, redact(url))
        password = PgTarget(url).password if is_postgres_url(url) else None
        if password:
            for form in dict.fromkeys((password, quote(password, safe=""))):
                if len(form) >= 3 or form in out.split():
                    out = out.replace(form, HIDDEN)
    out = _PASSWORD_PAIR.sub(lambda m: m.group(1) + HIDDEN, out)
    return _USERINFO.sub(lambda m: m.group(1) + "@", out)


def quote_identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier (a schema or table name memtui was given)."""
    return '"' + name.replace('"', '""') + '"'


def like_prefix(text: str) -> str:
    """A LIKE pattern matching what starts with ``text`` followed by anything, with
    ``%``, ``_`` and the escape character in ``text`` matched as themselves
    (used with ``ESCAPE '\\'``)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"
