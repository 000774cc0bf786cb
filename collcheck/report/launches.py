"""Reports of a folder that holds several launches (inputs/launches.py), in every format.

`collcheck diff` checks each launch and reports it as soon as it is checked, like a test runner:
one line per launch (verdict, id, ranks, collectives, the first finding in a few words), then the
full report of the first MAX_FULL_REPORTS launches with findings. JSON is a list of per-launch
reports, JUnit one testsuite per launch, GitHub annotations name the launch in their titles.
Only the reports with findings are kept until the end (the text form prints them there).
Launch ids come from the logs: they are shown through `one_line`."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from rich.text import Text

from ..base.guard import guarded
from ..base.untrusted import one_line, visible
from ..knowledge import sites
from ..model import group_label, rank_ranges
from . import LAUNCH_CHARS, MESSAGE_CHARS, github, junit
from .console import make_console
from .formats import OUTCOMES, outcome
from .json_report import JSON_VERSION, to_dict, with_launch, write_json

MAX_FULL_REPORTS = 10  # full text reports after the lines; --launch shows any other
ID_WIDTH = 48  # the id column's widest (a longer id pushes the rest of its line)
ID_CHARS = LAUNCH_CHARS
WORDS = 160  # a line's words about the first finding, at most


def first_words(report) -> str:
    """The first finding in a few words ('tensor size mismatch: group 0, #3, culprit rank 1'),
    else what could not be checked, else ''."""
    f = report.first
    if f is not None:
        ranks = f"culprit rank{'s' if len(f.ranks) != 1 else ''} {rank_ranges(f.ranks)}" if f.ranks else ""
        return one_line(", ".join(x for x in (f"{f.title}: {group_label(report.run, f.group)}", f"#{f.number}", ranks)
                                  if x), WORDS)
    return one_line(report.run.unchecked[0], WORDS) if report.run.unchecked else ""


class LaunchesReport:
    """One format's report of several launches: `add` each as it is checked (its Report, or why it
    could not be read), then `finish`. `counts` gathers the outcomes for the exit code:
    findings, incomplete, clean, unreadable."""

    def __init__(self, out, where: str, ids: list[str], context: int = 4, **_) -> None:
        self.out = out
        self.where = where
        self.total = len(ids)
        self.context = context
        self.counts = dict.fromkeys(OUTCOMES, 0)

    def add(self, launch: str, world: int, report=None, error: str | None = None) -> None:
        self.counts[outcome(report)] += 1
        self._add(launch, world, report, error)

    def _add(self, launch: str, world: int, report, error: str | None) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        raise NotImplementedError


class TextLaunches(LaunchesReport):
    def __init__(self, out, where: str, ids: list[str], context: int = 4, **_) -> None:
        super().__init__(out, where, ids, context)
        self.console = make_console(out)
        self.id_width = min(max((len(one_line(i, ID_CHARS)) for i in ids), default=0), ID_WIDTH)
        self.full: list[tuple[str, object]] = []
        self.more = 0
        self._print(f"collcheck diff: {one_line(where)}  ({self.total} launches)")

    def _print(self, text: str) -> None:
        self.console.print(Text(text), soft_wrap=True)
        self.console.file.flush()

    def _add(self, launch: str, world: int, report, error: str | None) -> None:
        name = one_line(launch, ID_CHARS).ljust(self.id_width)
        if report is None:
            self._print(f"  {'UNREADABLE':<10}  {name}  world {world}: {one_line(error)}")
            return
        run = report.run
        ranks = f"{len(run.ranks)}/{run.world} ranks"
        collectives = sum(len(log) for log in run.ranks.values())
        words = first_words(report)
        self._print(f"  {report.verdict.upper():<10}  {name}  {ranks:>12}  {collectives:>9} collectives"
                    + (f"  {words}" if words else ""))
        if report.findings:
            if len(self.full) < MAX_FULL_REPORTS:
                self.full.append((launch, report))
            else:
                self.more += 1

    def finish(self) -> None:
        from .text import render

        parts = [f"{n} {'with findings' if what == 'findings' else what}" for what, n in self.counts.items() if n]
        self._print(f"{self.total} launches: {', '.join(parts)}")
        for launch, report in self.full:
            self.console.print()
            self.console.rule(Text(f"launch {one_line(launch, ID_CHARS)}"))
            self.console.file.flush()
            render(report, self.out, context=self.context)
        if self.more:
            self._print(f"... {self.more} more launches with findings (--launch ID shows one's report, "
                        "--format json all of them)")


class JsonLaunches(LaunchesReport):
    """A list of per-launch reports: each is the one-run report with "launch" after its version;
    a launch that could not be read is {"collcheck_json", "launch", "world", "verdict": "error",
    "error"}."""

    def __init__(self, out, where: str, ids: list[str], context: int = 4, **_) -> None:
        super().__init__(out, where, ids, context)
        self.items: list[dict] = []

    def _add(self, launch: str, world: int, report, error: str | None) -> None:
        if report is None:
            self.items.append({"collcheck_json": JSON_VERSION, "launch": launch, "world": world, "verdict": "error",
                               "error": error})
        else:
            self.items.append(with_launch(to_dict(report), launch))

    def finish(self) -> None:
        write_json(self.items, self.out, indent=1)
        self.out.write("\n")


class JunitLaunches(LaunchesReport):
    """<testsuites>, one <testsuite> per launch named by its id; a launch that could not be read is
    a suite whose one test case has an <error>."""

    def __init__(self, out, where: str, ids: list[str], context: int = 4, **_) -> None:
        super().__init__(out, where, ids, context)
        self.suites: list[ET.Element] = []

    def _add(self, launch: str, world: int, report, error: str | None) -> None:
        if report is not None:
            self.suites.append(junit.suite(report, one_line(launch, ID_CHARS)))
            return
        suite = ET.Element("testsuite", name=one_line(launch, ID_CHARS), tests="1", failures="0", errors="1")
        case = ET.SubElement(suite, "testcase", classname="collcheck.diff", name="load")
        ET.SubElement(case, "error", message=one_line(error))
        self.suites.append(suite)

    def finish(self) -> None:
        root = ET.Element("testsuites", name="collcheck", tests=str(sum(int(s.get("tests")) for s in self.suites)),
                          failures=str(sum(int(s.get("failures")) for s in self.suites)),
                          errors=str(self.counts["unreadable"]))
        root.extend(self.suites)
        junit.write(root, self.out)


class GithubLaunches(LaunchesReport):
    """Each launch's annotations as it is checked, the launch in their titles; one notice at the
    end when no launch had a finding or could not be read."""

    def _add(self, launch: str, world: int, report, error: str | None) -> None:
        if report is not None:
            github.render(report, self.out, launch=launch)
            return
        guarded(self.out).command("error", visible(error, MESSAGE_CHARS),
                                  title=one_line(f"collcheck: launch {launch} could not be read"))

    def finish(self) -> None:
        if not self.counts["findings"] and not self.counts["unreadable"]:
            guarded(self.out).command("notice", f"no divergence found in {self.total} launches", title="collcheck")


def stats_line(launch: str, st, id_width: int) -> str:
    """A launch's statistics in a line: ranks, collectives, the most time one rank spent inside
    collectives, the call site that took most, how many hints."""
    run = st.run
    per_rank: dict[int, float] = {}
    for s in st.sites:
        for r, us in s.per_rank_us.items():
            per_rank[r] = per_rank.get(r, 0) + us
    line = (f"  {one_line(launch, ID_CHARS).ljust(id_width)}  {f'{len(run.ranks)}/{run.world} ranks':>12}  "
            f"{sum(len(log) for log in run.ranks.values()):>9} collectives  "
            f"{max(per_rank.values(), default=0) / 1e6:9.3f} s inside them")
    if st.sites:
        top = st.sites[0]
        where = f"{sites.short(top.site)} " if top.site else ""
        line += f"  most: {one_line(where + top.api, 80)} {top.total_s:.3f} s"
    return line + (f"  {len(st.hints)} hint{'s' if len(st.hints) != 1 else ''}" if st.hints else "")


class TextStatsLaunches(LaunchesReport):
    """`collcheck stats` of several launches: a line per launch as it is computed."""

    def __init__(self, out, where: str, ids: list[str], **_) -> None:
        super().__init__(out, where, ids)
        self.console = make_console(out)
        self.id_width = min(max((len(one_line(i, ID_CHARS)) for i in ids), default=0), ID_WIDTH)
        self.console.print(Text(f"collcheck stats: {one_line(where)}  ({len(ids)} launches; --launch ID for one's "
                                "tables)"), soft_wrap=True)

    def _add(self, launch: str, world: int, st, error: str | None) -> None:
        text = stats_line(launch, st, self.id_width) if st is not None else \
            f"  {one_line(launch, ID_CHARS).ljust(self.id_width)}  world {world}: could not be read: {one_line(error)}"
        self.console.print(Text(text), soft_wrap=True)
        self.console.file.flush()

    def finish(self) -> None:
        pass


class JsonStatsLaunches(LaunchesReport):
    """A list of per-launch statistics: each the one-run form with "launch"; a launch that could
    not be read {"launch", "world", "error"}."""

    def __init__(self, out, where: str, ids: list[str], **_) -> None:
        super().__init__(out, where, ids)
        self.items: list[dict] = []

    def _add(self, launch: str, world: int, st, error: str | None) -> None:
        from .stats import to_dict as stats_dict

        self.items.append(with_launch(stats_dict(st), launch) if st is not None
                          else {"launch": launch, "world": world, "error": error})

    def finish(self) -> None:
        write_json(self.items, self.out, indent=1)
        self.out.write("\n")
