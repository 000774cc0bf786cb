"""JUnit XML: one test case per group plus one for the hang check, for CI dashboards."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from ..model import group_label


def render(report, out) -> None:
    suite = ET.Element("testsuite", name="collcheck", tests="0", failures="0")
    cases = 0
    failures = 0
    # findings about groups no collective used (group creation, calls torch skipped: group "?")
    unseen = sorted({f.group for f in report.findings if f.kind not in ("hang", "deadlock")} - set(report.counts))
    names = list(report.counts) + unseen + ["hang"]
    for name in names:
        case = ET.SubElement(suite, "testcase", classname="collcheck.diff", name=group_label(report.run, name) if name != "hang" else "hang")
        cases += 1
        mine = [f for f in report.findings if (f.kind in ("hang", "deadlock")) == (name == "hang") and (name == "hang" or f.group == name)]
        for f in mine:
            failures += 1
            el = ET.SubElement(case, "failure", type=f.kind, message=f"{f.title}: ranks {f.ranks}")
            el.text = f.message
    suite.set("tests", str(cases))
    suite.set("failures", str(failures))
    out.write(ET.tostring(suite, encoding="unicode"))
    out.write("\n")
