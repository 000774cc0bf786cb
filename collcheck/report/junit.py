"""JUnit XML: one test case per group plus one for the hang check, for CI dashboards.

Well-formed whatever the logs hold: every string from them goes through `one_line` (attributes)
or `visible` (the failure text), which escape each character XML 1.0 forbids (C0 controls, lone
surrogates, U+FFFE/U+FFFF) along with every other non-printable one; ElementTree escapes the rest."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from ..base.guard import guarded
from ..base.untrusted import one_line, visible
from ..model import group_label, rank_ranges, stopped_ranks
from . import LAUNCH_CHARS, MESSAGE_CHARS


def render(report, out) -> None:
    write(suite(report), out)


def render_launch(report, out, launch: str | None = None, **_) -> None:
    """One <testsuite> (`launch`: its id in a folder of several names it)."""
    write(suite(report) if launch is None else suite(report, one_line(launch, LAUNCH_CHARS)), out)


def write(element, out) -> None:
    out = guarded(out, "xml")  # failure texts keep their line breaks
    out.write(ET.tostring(element, encoding="unicode"))
    out.write("\n")


def suite(report, suite_name: str = "collcheck") -> ET.Element:
    """The report as one <testsuite> (report/launches.py gathers one per launch)."""
    testsuite = ET.Element("testsuite", name=suite_name, tests="0", failures="0")
    cases = 0
    failures = 0
    # findings about groups no collective used (group creation, calls torch skipped: group "?")
    unseen = sorted({f.group for f in report.findings if f.kind not in ("hang", "deadlock")} - set(report.counts),
                    key=str)
    names = list(report.counts) + unseen + ["hang"]
    for name in names:
        label = one_line(group_label(report.run, name)) if name != "hang" else "hang"
        case = ET.SubElement(testsuite, "testcase", classname="collcheck.diff", name=label)
        cases += 1
        mine = [f for f in report.findings if (f.kind in ("hang", "deadlock")) == (name == "hang") and (name == "hang" or f.group == name)]
        for f in mine:
            failures += 1
            el = ET.SubElement(case, "failure", type=one_line(f.kind), message=one_line(f"{f.title}: ranks {f.ranks}"))
            el.text = visible(f.message, MESSAGE_CHARS)
    for ranks, why in stopped_ranks(report.run):  # not checked to the end: skipped, not passed
        name = f"recording of rank{'s' if len(ranks) != 1 else ''} {rank_ranges(ranks)}"
        case = ET.SubElement(testsuite, "testcase", classname="collcheck.diff", name=name)
        ET.SubElement(case, "skipped", message=one_line(f"recording stopped: {why}; not checked after that"))
        cases += 1
    testsuite.set("tests", str(cases))
    testsuite.set("failures", str(failures))
    return testsuite
