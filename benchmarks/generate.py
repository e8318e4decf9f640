"""Synthetic memory databases for the benchmarks, fixed seed, any size.

Text is 5–20 words per record drawn from a Zipf-distributed vocabulary of
20,000 made-up words (frequency rank r has probability proportional to 1/r),
so some words are in most records and most words are in very few. Every tier
is present; tactics spread over hundreds of stack profiles and tools,
findings and observations over many engagements and runs; some tactics are
refuted and some working notes have expired; one engagement (``eng-00000``) is
big, a sixth of all engagement-scoped records. Every record has a 384-dimension
vector (random, unit length) made with numpy and stored through the store's own
bulk path (``MemoryStore.ingest(rows, vectors=...)``) under the embedder name
``bench-random-384``.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from memtui.core.records import tactic_signature
from memtui.core.store import MemoryStore, tactic_metadata

VOCAB_SIZE = 20_000
DIM = 384
EMBEDDER_NAME = f"bench-random-{DIM}"
NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
FORMAT_VERSION = 1  # bump when the generated data changes, so old files are not reused
BIG_ENGAGEMENT = "eng-00000"  # a sixth of all engagement-scoped records (see ``generate``)

TIER_SHARES = (  # (tier, record_type, share of records)
    ("working", "note", 0.10),
    ("episodic", "finding", 0.20),
    ("episodic", "observation", 0.30),
    ("longterm", "tactic", 0.20),
    ("knowledge", "reference", 0.20),
)
TOOLS = (
    "sqlmap commix dalfox nuclei ffuf gobuster wfuzz nikto xsstrike tplmap ssrfmap "
    "jwt_tool arjun kiterunner graphqlmap nosqlmap ghauri corsy crlfuzz dirsearch "
    "feroxbuster httpx katana hakrawler paramspider gau waybackurls subfinder amass "
    "dnsx naabu masscan nmap testssl sslyze whatweb wafw00f burp zap semgrep"
).split()
PARAMS = "q id page sort filter user name email token redirect url file path lang cb".split()
SEVERITY_SHARES = (
    ("critical", 0.03),
    ("high", 0.12),
    ("medium", 0.3),
    ("low", 0.3),
    ("info", 0.25),
)
PROFILE_PARTS = (
    ("python", "java", "php", "node", "go", "ruby", "dotnet"),
    ("postgresql", "mysql", "mongodb", "sqlite", "mssql", "oracle", "unknown"),
    ("waf_present", "no_waf"),
    ("generic_waf", "cloudflare", "akamai", "modsecurity", "none"),
    ("rest", "graphql", "soap", "grpc"),
    ("flask", "django", "spring", "express", "rails", "laravel", "gin", "aspnet", "generic"),
)
_ONSETS = "b c d f g h j k l m n p r s t v w z br cr dr fl gr kl pr st tr sh ch th".split()
_VOWELS = "a e i o u ai ea io ou".split()
_CODAS = ["", "", "", "n", "r", "s", "l", "t", "x", "m", "nd", "st"]


@dataclass
class Dataset:
    rows: list[dict[str, Any]]
    vectors: np.ndarray
    vocabulary: list[str]
    profiles: list[str]
    engagements: list[str]
    word_ids: np.ndarray  # every record's word ranks, concatenated
    offsets: np.ndarray  # record i's words are word_ids[offsets[i]:offsets[i + 1]]


def vocabulary(rng: np.random.Generator, size: int = VOCAB_SIZE) -> list[str]:
    """``size`` distinct pronounceable made-up words, 3–12 letters, in rank order."""
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < size:
        syllables = int(rng.integers(1, 4))
        word = "".join(
            _ONSETS[int(rng.integers(len(_ONSETS)))]
            + _VOWELS[int(rng.integers(len(_VOWELS)))]
            + _CODAS[int(rng.integers(len(_CODAS)))]
            for _ in range(syllables)
        )
        if 3 <= len(word) <= 12 and word not in seen:
            seen.add(word)
            words.append(word)
    return words


def zipf_probabilities(size: int = VOCAB_SIZE) -> np.ndarray:
    weights = 1.0 / np.arange(1, size + 1, dtype=np.float64)
    return weights / weights.sum()


def _timestamps(seconds: np.ndarray) -> list[str]:
    """Stored-form UTC timestamps for offsets in seconds from 2025-01-01."""
    base = np.datetime64("2025-01-01T00:00:00", "us")
    moments = base + (seconds * 1_000_000).astype("timedelta64[us]")
    return [text + "Z" for text in np.datetime_as_string(moments, unit="us").tolist()]


def _choice(rng: np.random.Generator, shares: tuple[tuple[str, float], ...], n: int) -> list[str]:
    names = [name for name, _ in shares]
    probs = np.array([share for _, share in shares])
    return [names[i] for i in rng.choice(len(names), size=n, p=probs / probs.sum()).tolist()]


def generate(records: int, seed: int = 20261130) -> Dataset:
    """Build ``records`` store-ready rows and their vectors, deterministically from ``seed``."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary(rng)
    n = int(records)
    n_profiles = max(40, n // 2500)
    n_engagements = max(20, n // 1000)
    profiles_seen: set[str] = set()
    profiles: list[str] = []
    while len(profiles) < n_profiles:
        profile = ":".join(part[int(rng.integers(len(part)))] for part in PROFILE_PARTS)
        if profile not in profiles_seen:
            profiles_seen.add(profile)
            profiles.append(profile)
    engagements = [f"eng-{i:05d}" for i in range(n_engagements)]

    lengths = rng.integers(5, 21, size=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    word_ids = rng.choice(VOCAB_SIZE, size=int(offsets[-1]), p=zipf_probabilities())
    vocab_arr = np.array(vocab, dtype=object)
    words = vocab_arr[word_ids].tolist()
    bounds = offsets.tolist()
    contents = [" ".join(words[bounds[i] : bounds[i + 1]]) for i in range(n)]

    kinds = rng.choice(len(TIER_SHARES), size=n, p=[s for _, _, s in TIER_SHARES]).tolist()
    created = _timestamps(np.sort(rng.uniform(0, 690 * 86400, size=n)))
    now_seconds = (NOW - datetime(2025, 1, 1, tzinfo=UTC)).total_seconds()
    expiry = _timestamps(now_seconds + rng.uniform(-30 * 86400, 30 * 86400, size=n))
    profile_of = rng.integers(n_profiles, size=n).tolist()
    # One big engagement (a sixth of all engagement-scoped records) for the scope forget.
    engagement_of = rng.integers(1, n_engagements, size=n)
    engagement_of[rng.random(size=n) < 1 / 6] = 0
    engagement_of = engagement_of.tolist()
    run_of = rng.integers(1, 6, size=n).tolist()
    tool_of = rng.integers(len(TOOLS), size=n).tolist()
    param_of = rng.integers(len(PARAMS), size=n).tolist()
    attempts = rng.integers(1, 31, size=n).tolist()
    tool_rate = rng.uniform(0.0, 0.9, size=len(TOOLS))
    tool_rate[rng.choice(len(TOOLS), size=4, replace=False)] = 0.0  # some tools never work
    successes = rng.binomial(np.array(attempts), tool_rate[np.array(tool_of)]).tolist()
    coin = rng.random(size=n).tolist()
    severities = _choice(rng, SEVERITY_SHARES, n)

    rows: list[dict[str, Any]] = []
    for i in range(n):
        tier, record_type, _ = TIER_SHARES[kinds[i]]
        row: dict[str, Any] = {
            "tier": tier,
            "record_type": record_type,
            "content": contents[i],
            "created_at": created[i],
        }
        if record_type == "tactic":
            profile = profiles[profile_of[i]]
            tool = TOOLS[tool_of[i]]
            endpoint = f"/api/{vocab[int(word_ids[bounds[i]])]}/t{i}"
            param = PARAMS[param_of[i]]
            refuted = coin[i] < 0.02
            meta = tactic_metadata(
                profile_hash=profile,
                tool=tool,
                endpoint=endpoint,
                param=param,
                successes=successes[i],
                attempts=attempts[i],
                proof="response differs" if successes[i] and coin[i] > 0.5 else None,
                technique="time-based blind" if coin[i] > 0.7 else None,
                refuted=refuted,
            )
            row.update(
                profile_hash=profile,
                tool_name=tool,
                url_pattern=endpoint,
                signature=tactic_signature(profile, tool, endpoint, param),
                refuted=refuted,
                metadata=meta,
            )
        elif record_type == "finding":
            engagement = engagements[engagement_of[i]]
            row.update(
                engagement=engagement,
                run_id=f"{engagement}-r{run_of[i]}",
                profile_hash=profiles[profile_of[i]],
                url_pattern=f"/app/{vocab[int(word_ids[bounds[i]])]}",
                metadata={
                    "finding_id": f"F-{i}",
                    "severity": severities[i],
                    "url": f"https://{engagement}.example/app/{i}",
                    "type": TOOLS[tool_of[i]],
                    "false_positive": coin[i] < 0.05,
                },
            )
        elif record_type == "observation":
            engagement = engagements[engagement_of[i]]
            row.update(
                engagement=engagement,
                run_id=f"{engagement}-r{run_of[i]}",
                tool_name=TOOLS[tool_of[i]],
                metadata={"source": TOOLS[tool_of[i]]},
            )
        elif record_type == "note":  # working scratch: every note expires, half already have
            engagement = engagements[engagement_of[i]]
            row.update(
                engagement=engagement,
                run_id=f"{engagement}-r{run_of[i]}",
                expires_at=expiry[i],
            )
        else:
            row["metadata"] = {"source": "handbook", "section": int(coin[i] * 100)}
        rows.append(row)

    vectors = np.empty((n, DIM), dtype=np.float32)
    step = 100_000
    for start in range(0, n, step):
        block = rng.standard_normal((min(step, n - start), DIM), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        vectors[start : start + len(block)] = block
    return Dataset(rows, vectors, vocab, profiles, engagements, word_ids, offsets)


class BenchEmbedder:
    """A query embedder for the random vectors: a unit vector seeded by the text."""

    name = EMBEDDER_NAME
    dim = DIM

    def __call__(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
            vector = np.random.default_rng(seed).standard_normal(DIM)
            out.append((vector / np.linalg.norm(vector)).tolist())
        return out


def clock() -> datetime:
    return NOW


def database_path(out_dir: Path, records: int, seed: int) -> Path:
    return Path(out_dir) / f"bench-{records}-seed{seed}-v{FORMAT_VERSION}.db"


def build_database(path: Path, data: Dataset, *, progress: Any = None) -> float:
    """Ingest ``data`` into a new database at ``path``; returns the seconds ``ingest`` took."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    with MemoryStore(path, clock=clock, operator="bench") as store:
        start = time.perf_counter()
        store.ingest(
            data.rows,
            source="benchmark",
            vectors=data.vectors,
            embedder_name=EMBEDDER_NAME,
            progress=progress,
        )
        elapsed = time.perf_counter() - start
        store.checkpoint()
    return elapsed


def write_sidecar(path: Path, info: dict[str, Any]) -> None:
    Path(f"{path}.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")


def read_sidecar(path: Path) -> dict[str, Any] | None:
    side = Path(f"{path}.json")
    if not side.exists() or not path.exists():
        return None
    try:
        return json.loads(side.read_text())
    except (OSError, ValueError):
        return None
