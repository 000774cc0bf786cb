"""Plain data between collcheck's own processes (collcheck/logfile/wire.py): builtins cross as they
were, tuples as tuples; anything else is refused when packed, and nothing unpacked runs code."""

from __future__ import annotations

import os
import pickle

import msgpack
import pytest

from collcheck.logfile import wire


def test_builtins_cross_as_they_were():
    value = {"a": (1, [2, (3, True, None, 1.5, b"\x00\xff")], "é\x1b[31m"), 5: [False, ()], "e": {}}
    back = wire.unpack(wire.pack(value))
    assert back == value and type(back["a"]) is tuple and type(back["a"][1]) is list
    assert type(back["a"][1][1]) is tuple and back[5][1] == ()


@pytest.mark.parametrize("value", [object(), {1, 2}, Exception("x"), [b"ok", frozenset()]],
                         ids=["object", "set", "exception", "nested"])
def test_anything_but_builtins_is_refused(value):
    with pytest.raises(TypeError):
        wire.pack(value)


def test_a_pickle_or_an_unknown_ext_type_is_not_read_as_code():
    evil = pickle.dumps(os.system)  # (a pickle is no message: it is not unpickled)
    with pytest.raises(Exception) as caught:
        wire.unpack(evil)
    assert not isinstance(caught.value, (TypeError, AttributeError))  # a decoding error, nothing called
    with pytest.raises(ValueError):
        wire.unpack(msgpack.packb(msgpack.ExtType(7, b"\x00")))


def test_messages_cross_a_pipe_in_order():
    r, w = os.pipe()
    try:
        for m in (["progress", "reading"], ["first", {"rows": [(0, "x")]}], ["done", None]):
            wire.send(w, m)
        os.close(w)
        w = None
        got = wire.Receiver(r, lambda: True)
        assert [got.receive() for _ in range(3)] == [["progress", "reading"], ["first", {"rows": [(0, "x")]}],
                                                    ["done", None]]
        with pytest.raises(EOFError):
            got.receive()
    finally:
        os.close(r)
        if w is not None:
            os.close(w)
