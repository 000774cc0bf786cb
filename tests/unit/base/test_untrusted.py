"""collcheck/base/untrusted.py: the one function every string from a log or dump passes through before
it is shown. Whatever it is given, what it returns acts on no terminal and is bounded."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from support import examples

from collcheck.base.untrusted import MAX_TEXT, one_line, visible

SETTINGS = settings(deadline=None, max_examples=examples(200))
ANY = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(),
                   lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                   max_leaves=8)


@SETTINGS
@given(st.text() | ANY)
def test_what_is_shown_is_printable_and_bounded(value):
    text = visible(value)
    assert all(ch.isprintable() or ch in "\n\t" for ch in text)
    assert len(text) <= MAX_TEXT + 1 or value.__class__ is str  # escapes lengthen a string's cut text
    line = one_line(value)
    assert line.isprintable()


@SETTINGS
@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))))
def test_printable_text_is_shown_as_it_is(text):
    text = text.replace("\u00a0", " ")  # (a no-break space is not printable to Python)
    if text.isprintable() and len(text) <= MAX_TEXT:
        assert visible(text) is text


def test_escapes_are_shown_as_python_writes_them():
    assert visible("a\x1b[31mb\x07\r\u202e\U000e0001") == "a\\x1b[31mb\\x07\\r\\u202e\\U000e0001"
    assert visible("two\nlines\tand a tab") == "two\nlines\tand a tab"
    assert one_line("two\nlines\tand a tab") == "two\\nlines\\tand a tab"
    assert one_line("osc \x1b]8;;http://x\x1b\\link") == "osc \\x1b]8;;http://x\\x1b\\link"


def test_values_that_are_not_strings_are_shown_short():
    nested = []
    for _ in range(60):  # str() of this is 2**60 characters long
        nested = [nested, nested]
    assert visible(nested) == "<list>"
    assert visible(10 ** 5000) == "<int of 16610 bits>"  # repr() would refuse it
    assert visible(b"\x1b" * 1000).startswith("b'\\x1b") and len(visible(b"x" * 1000)) < 80
    assert visible(None) == "None" and visible(float("nan")) == "nan"
    assert visible("x" * (MAX_TEXT + 10)) == "x" * MAX_TEXT + "…"
