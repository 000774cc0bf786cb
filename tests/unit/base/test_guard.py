"""The CI guard (base/guard.py): whatever text is written, in whatever pieces, a CI runner finds
no command in what comes out, and a JSON or XML reader gets the original text back."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET

from hypothesis import given, settings
from hypothesis import strategies as st
from support.ci import runner_commands

from collcheck.base.guard import ESCAPES, CommandGuard, guard_lines, guarded

# text made of the pieces commands are made of, so that generated text forms them often
PIECES = st.sampled_from(["::", ":", "#", "##", "[", "]", "##[", "##vso[", "error", "add-mask", " ", "\t", "\n",
                          "\r", "x", "stop-commands", "=", ",", "\u3000", "\xa0"])
TEXT = st.lists(PIECES, max_size=40).map("".join)


def _written(chunks: list[str], flavour: str = "text") -> str:
    out = io.StringIO()
    g = CommandGuard(out, flavour)
    for chunk in chunks:
        g.write(chunk)
    return out.getvalue()


def _unescaped(text: str, flavour: str = "text") -> str:
    for ch, escaped in ESCAPES[flavour].items():
        text = text.replace(escaped, ch)
    return text


@settings(max_examples=400, deadline=None)
@given(st.lists(TEXT, max_size=8))
def test_no_command_survives_whatever_the_pieces(chunks):
    out = _written(chunks)
    assert runner_commands(out) == []
    assert _unescaped(out) == "".join(chunks)  # (PIECES hold no backslash: every escape is the guard's)


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXT, max_size=6), st.integers(1, 7))
def test_json_through_the_guard_reads_back_the_same_values(values, indent):
    doc = json.dumps({"values": values, "::k": "##[x]"}, indent=indent)
    out = _written([doc[i:i + 5] for i in range(0, len(doc), 5)], "json")
    assert runner_commands(out) == []
    assert json.loads(out) == {"values": values, "::k": "##[x]"}


@settings(max_examples=100, deadline=None)
@given(TEXT)
def test_xml_through_the_guard_reads_back_the_same_text(text):
    text = re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", "", text.replace("\r", ""))
    element = ET.Element("failure", message="m")
    element.text = text
    out = guard_lines(ET.tostring(element, encoding="unicode"), "xml")
    assert runner_commands(out) == []
    assert (ET.fromstring(out).text or "") == text


def test_commands_on_purpose_pass_through_nested_guards_escaped():
    raw = io.StringIO()
    outer = CommandGuard(raw)
    inner = guarded(outer, "json")
    outer.write("half a line ")
    CommandGuard(outer).command("error", "100% sure\n::add-mask::x", file="a,b:c.py", line=3, col=None)
    inner.write('"##[x]"\n')
    assert runner_commands(raw.getvalue()) == [("error", {"file": "a%2Cb%3Ac.py", "line": "3"},
                                                 "100%25 sure%0A::add-mask::x")]
    assert raw.getvalue().startswith("half a line \n::error ")


def test_a_guard_passes_on_what_a_stream_has():
    raw = io.StringIO()
    g = CommandGuard(raw)
    assert g.encoding == "utf-8" and not g.isatty() and g.getvalue() == "" and guarded(g) is g
