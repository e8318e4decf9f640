"""Regenerate screenshots/: an SVG of each tab and a PNG of the Search tab's breakdown.

    python scripts/screenshots.py [--out screenshots] [--size 120x40]

The app runs headless on the sample corpus with a fixed clock (2026-11-30 12:00 UTC),
so the images are reproducible. The PNG is rendered from the SVG with CairoSVG
(``pip install cairosvg``) or, failing that, ``rsvg-convert`` (librsvg2-bin); the
terminal font is swapped for DejaVu Sans Mono, which has the same cell width as
Fira Code and is installed almost everywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memtui.core.store import MemoryStore  # noqa: E402
from memtui.tui.app import make_app  # noqa: E402
from memtui.tui.testing import build_sample_db, fixed_clock, settle  # noqa: E402

Steps = Callable[[Pilot], Awaitable[None]]


async def keys(pilot: Pilot, *names: str) -> None:
    for name in names:
        await pilot.press(name)
        await settle(pilot)


async def type_text(pilot: Pilot, text: str) -> None:
    for char in text:
        await pilot.press("space" if char == " " else char)


async def browse(pilot: Pilot) -> None:
    await settle(pilot)


async def search(pilot: Pilot) -> None:
    await keys(pilot, "slash")
    await type_text(pilot, "sql injection")
    await keys(pilot, "enter", "left_square_bracket", "left_square_bracket")


async def search_breakdown(pilot: Pilot) -> None:
    await keys(pilot, "slash")
    await type_text(pilot, "sql injection")
    await keys(pilot, "enter", "enter")


async def lanes(pilot: Pilot) -> None:
    await keys(pilot, "3")


async def audit(pilot: Pilot) -> None:
    await keys(pilot, "4")


async def eval_tab(pilot: Pilot) -> None:
    """The sample questions (named by their path in the repository), question 10's results."""
    await keys(pilot, "5")
    pilot.app.query_one("#eval-path", Input).value = "sample_corpus/questions.json"
    await keys(pilot, "enter", *["down"] * 9, "enter")


async def forget_dialog(pilot: Pilot) -> None:
    await keys(pilot, "f")
    await type_text(pilot, "client asked for erasure")
    await keys(pilot, "enter")


SCENES: dict[str, Steps] = {
    "browse": browse,
    "search": search,
    "search-breakdown": search_breakdown,
    "lanes": lanes,
    "audit": audit,
    "eval": eval_tab,
    "forget-dialog": forget_dialog,
}


def corrections(store: MemoryStore) -> None:
    """A refutation and a forget, so the audit log has something to show."""
    store.refute(1, reason="payload patched upstream; the WAF now blocks pg_sleep")
    store.forget(24, reason="duplicate of finding #19")


SETUP: dict[str, Callable[[MemoryStore], None]] = {"audit": corrections}


async def shoot(db: Path, name: str, steps: Steps, size: tuple[int, int]) -> str:
    with MemoryStore(db, clock=fixed_clock, operator="operator") as store:
        if name in SETUP:
            SETUP[name](store)
        app = make_app(store, db_label="sample.db")
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await steps(pilot)
            await pilot.wait_for_scheduled_animations()
            await pilot.pause()
            return app.export_screenshot(title=f"memtui: {name}")


MEM0_FIXTURE = ROOT / "tests" / "fixtures" / "mem0_store"


async def shoot_mem0(folder: Path, size: tuple[int, int]) -> str:
    """The same app on a foreign store: the committed mem0 fixture (a Qdrant folder
    and its history database), one record's ADD/UPDATE/DELETE history in the detail."""
    from memtui.sources import open_source

    target = folder / "mem0_store"
    shutil.copytree(MEM0_FIXTURE, target)
    (target / "history.sqlite").rename(target / "history.db")
    with open_source(target / "qdrant", clock=fixed_clock) as source:
        app = make_app(source)
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await keys(pilot, "down", "down")
            await pilot.wait_for_scheduled_animations()
            await pilot.pause()
            return app.export_screenshot(title="memtui: a mem0 store")


def to_png(svg: Path, png: Path) -> str:
    """Render ``svg`` to ``png``; returns how, or raises RuntimeError saying why not."""
    text = svg.read_text(encoding="utf-8").replace(
        "font-family: Fira Code, monospace", "font-family: DejaVu Sans Mono, Fira Code, monospace"
    )
    try:
        import cairosvg  # type: ignore[import-not-found]
    except ImportError:
        cairosvg = None
    if cairosvg is not None:
        cairosvg.svg2png(bytestring=text.encode("utf-8"), write_to=str(png), output_width=1800)
        return "cairosvg"
    converter = shutil.which("rsvg-convert")
    if converter:
        with tempfile.NamedTemporaryFile("w", suffix=".svg", delete=False) as handle:
            handle.write(text)
        subprocess.run([converter, "-w", "1800", "-o", str(png), handle.name], check=True)
        Path(handle.name).unlink()
        return "rsvg-convert"
    raise RuntimeError("no SVG renderer: pip install cairosvg, or apt-get install librsvg2-bin")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--size", default="120x40", help="terminal WIDTHxHEIGHT")
    args = parser.parse_args()
    os.chdir(ROOT)  # the Eval scene's questions file is named relative to the repository
    width, height = (int(part) for part in args.size.lower().split("x"))
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        for name, steps in SCENES.items():
            db = build_sample_db(Path(folder) / f"{name}.db")
            svg = asyncio.run(shoot(db, name, steps, (width, height)))
            path = args.out / f"{name}.svg"
            path.write_text(svg, encoding="utf-8")
            print(f"wrote {path}")
        svg = asyncio.run(shoot_mem0(Path(folder), (width, height)))
        path = args.out / "mem0-browse.svg"
        path.write_text(svg, encoding="utf-8")
        print(f"wrote {path}")
    png = args.out / "search-breakdown.png"
    try:
        how = to_png(args.out / "search-breakdown.svg", png)
    except RuntimeError as exc:
        print(f"PNG not written: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {png} ({how})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
