"""Ranks that die inside a collective. argv[1]: kill | abort | watchdog.

kill:     rank 1 blocks in all_reduce (rank 0 sleeps); a thread SIGKILLs rank 1 after 1.5 s.
abort:    rank 0 all_reduces 4 floats, rank 1 8 floats: gloo aborts the receiving rank.
watchdog: rank 1 waits 3 s in an all_reduce (COLLCHECK_HANG_SECONDS=1 dumps stacks), then
          blocks in a second all_reduce and sends itself SIGTERM from a thread.
object:   rank 0 calls all_gather_object; rank 1 only matches its first wire op (the size
          exchange), so rank 0 blocks in the second one and is SIGKILLed after 1.5 s.
"""
import datetime
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist


def signal_later(sig, delay):
    def fire():
        time.sleep(delay)
        os.kill(os.getpid(), sig)
        time.sleep(3600)  # not exiting while faulthandler walks the threads (a dying thread state crashes it)

    threading.Thread(target=fire, daemon=True).start()


def stuck_in_all_reduce():
    dist.all_reduce(torch.ones(3))  # @stuck


def terminated_in_all_reduce():
    dist.all_reduce(torch.ones(5))  # @terminated


def main():
    mode = sys.argv[1]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=15))
    rank = dist.get_rank()
    dist.barrier()  # @barrier
    if mode == "kill":
        if rank == 1:
            signal_later(signal.SIGKILL, 1.5)
            dist.all_reduce(torch.ones(7))  # @killed
        else:
            time.sleep(30)
    elif mode == "abort":
        dist.all_reduce(torch.ones(4 if rank == 0 else 8))  # @mismatch
        time.sleep(5)
    elif mode == "object":
        if rank == 0:
            signal_later(signal.SIGKILL, 1.5)
            dist.all_gather_object([None, None], {"rank": rank})  # @object
        else:
            dist.all_gather([torch.zeros(1, dtype=torch.long) for _ in range(2)], torch.tensor([40]))  # @sizes
            time.sleep(30)
    elif mode == "watchdog":
        if rank == 1:
            stuck_in_all_reduce()
            signal_later(signal.SIGTERM, 1.0)
            terminated_in_all_reduce()
        else:
            time.sleep(3)
            dist.all_reduce(torch.ones(3))  # @stuck_peer
            time.sleep(30)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
