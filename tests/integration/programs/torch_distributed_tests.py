"""PyTorch's own distributed tests (torch.testing._internal.distributed.distributed_test), as
test/distributed/test_distributed_spawn.py runs them: two spawned ranks per test, gloo. Each test
records into a run directory of its own (COLLCHECK_RUN_ID = its name). Usage: python THIS TEST ..."""
import os
import sys
import tempfile
import unittest

os.environ.setdefault("BACKEND", "gloo")
os.environ.setdefault("WORLD_SIZE", "2")
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="collcheck-torch-tests-"))

from torch.testing._internal.distributed.distributed_test import DistributedTest, TestDistBackend  # noqa: E402


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        os.environ["COLLCHECK_RUN_ID"] = self._testMethodName  # inherited by the spawned ranks
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    names = [f"TestDistBackendWithSpawn.{n}" for n in sys.argv[1:]]
    result = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.loadTestsFromNames(names, sys.modules[__name__]))
    sys.exit(0 if result.wasSuccessful() and not result.skipped else 1)
