"""The app on a LangGraph ``PostgresStore``: the header names the URL without its
password, and the change probe drives the same "live: N new" as for a SQLite store."""

from __future__ import annotations

from conftest import fixed_clock

from memtui.sources import open_source
from memtui.tui.app import make_app
from memtui.tui.testing import screen_text, settle

from .conftest import PASSWORD, PASSWORD_USER, database_url
from .support import open_library


async def test_the_app_browses_and_sees_an_agents_writes(pg_server, lg_store):
    database = lg_store.split("?")[0].rsplit("/", 1)[1]
    url = database_url(pg_server, database, f"{PASSWORD_USER}:{PASSWORD}")
    source = open_source(url, clock=fixed_clock)
    # the probe of a small store runs whenever the app asks (test_change_watch paces an
    # expensive one), however slow a loaded machine makes it
    source._watch.cheap_seconds = float("inf")
    try:
        app = make_app(source, poll_interval=None)
        async with app.run_test(size=(160, 50)) as pilot:
            await settle(pilot)
            text = screen_text(app)
            assert f"postgresql://{PASSWORD_USER}@/m" in text  # shortened to fit the header
            assert "READ-ONLY" in text and "33 live records" in text
            assert PASSWORD not in text
            app._poll()
            await settle(pilot)
            assert app.external_changes == 0
            with open_library(lg_store) as store:
                store.put(("memories", "user-9"), "live-1", {"text": "written while watched"})
            app._poll()
            await settle(pilot)
            assert app.external_changes == 1
            text = screen_text(app)
            assert "live: 1 new since open" in text and "34 live records" in text
            # F5 has the source read afresh: the counts it keeps between changes go
            rereads = []
            source.reread = lambda: rereads.append(1)
            await pilot.press("f5")
            await settle(pilot)
            assert rereads == [1]
    finally:
        source.close()
