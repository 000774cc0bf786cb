"""The run's name where every rank named it its own way (ranks launched apart: srun, mpirun, a
shell each): they agree on the first one set in the job's store (capture/session.py), a real
store of torch's here; a name read there that is not a plain folder name is never used."""

from __future__ import annotations

import pytest
from torch.distributed import HashStore

from collcheck.base.settings import Settings, new_run_id
from collcheck.capture import session


class _C10d:
    """What session._run_id asks of torch.distributed.distributed_c10d: the default group's store."""

    def __init__(self, store):
        self.store = store

    def _get_default_store(self):
        if self.store is None:
            raise AssertionError("the store was asked")
        return self.store


@pytest.fixture(autouse=True)
def _no_torchrun(monkeypatch):
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)


def test_ranks_that_named_the_run_apart_take_the_first_name_set():
    store = HashStore()
    first = Settings(run_id=new_run_id())
    assert session._run_id(first, _C10d(store)) == first.run_id
    assert session._run_id(Settings(), _C10d(store)) == first.run_id  # (collcheck.enable() without a name)


def test_a_name_every_rank_has_already_is_kept_without_the_store(monkeypatch):
    assert session._run_id(Settings(run_id="from-the-parent"), _C10d(None)) == "from-the-parent"
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "rdzv")
    assert session._run_id(Settings(run_id=new_run_id()), _C10d(None)) == "rdzv"


@pytest.mark.parametrize("hostile", ["../../etc", "/abs", ".hidden", "a/b", "\x1b[31m", "x" * 300])
def test_a_name_in_the_store_that_is_no_plain_folder_name_is_never_used(hostile):
    store = HashStore()
    store.set(session.RUN_KEY, hostile)
    mine = Settings(run_id=new_run_id())
    assert session._run_id(mine, _C10d(store)) == mine.run_id


def test_a_store_that_cannot_compare_and_set_leaves_the_rank_its_own_name():
    class Refusing:
        def compare_set(self, *args):
            raise RuntimeError("not supported")

    mine = Settings(run_id=new_run_id())
    assert session._run_id(mine, _C10d(Refusing())) == mine.run_id
