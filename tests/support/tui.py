"""Driving the Textual TUI in tests: open it on a run at a fixed size, wait for the load, press
keys, read what a widget shows as plain text."""

from __future__ import annotations

import asyncio
import io

from rich.console import Console

from collcheck.tui.app import CollcheckApp

SIZE = (160, 45)


def plain(app, selector: str) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(app.query_one(selector).content)
    return out.getvalue()


async def wait_loaded(pilot, app):
    for _ in range(600):
        if app.report is not None or app.error is not None:
            await pilot.pause()
            return
        await pilot.pause(0.05)
    raise AssertionError("the run did not load")


def drive(target: str, script, size=SIZE):
    """Open the app on `target`, wait for the load, run `script(pilot, app)`."""

    async def main():
        app = CollcheckApp(target)
        async with app.run_test(size=size) as pilot:
            await wait_loaded(pilot, app)
            await script(pilot, app)
        return app

    return asyncio.run(main())


async def type_line(pilot, text: str):
    await pilot.pause()
    for ch in text:
        await pilot.press(ch if ch not in "/:._ " else {"/": "slash", ":": "colon", ".": "full_stop",
                                                        "_": "underscore", " ": "space"}[ch])
    await pilot.press("enter")
    await pilot.pause()


async def wait_full(pilot, app):
    for _ in range(600):
        if app.report is not None and not app.preview and app.load_seconds:
            await pilot.pause()
            return
        await pilot.pause(0.05)
    raise AssertionError("the full run did not load")


async def wait_first(pilot, app):
    """Until the loader process's first screen is shown (or the load failed, or the process died)."""
    for _ in range(600):
        if app.first_at or app.report is not None or app.error is not None or app.loader_died:
            await pilot.pause()
            return
        await pilot.pause(0.05)
    raise AssertionError("no first screen")
