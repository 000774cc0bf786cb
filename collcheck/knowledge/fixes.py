"""How each fix is worded: one phrasing per situation, for `collcheck diff` (analysis) and `collcheck
lint` alike, so that a user reads the same advice for the same mistake whichever found it.

The frameworks' own calls carry their fix in their tables (frameworks/: `self.log(...,
sync_dist=True)` is fixed in Lightning's words); everything else is here.
"""

from __future__ import annotations

# -- what a kind of finding usually calls for (analysis/findings.py's KINDS) -----------------------
BY_KIND = {
    "missing": "make every rank reach the call: move it out of the rank-dependent branch or early exit",
    "extra": "issue it on every rank of the group, or on none (use a subgroup for a subset)",
    "op_mismatch": "make the ranks issue the same collectives in the same order",
    "shape_mismatch": "make the tensor shape independent of the rank (pad the last batch, or all-gather sizes first)",
    "dtype_mismatch": "cast to one dtype on every rank before the collective",
    "split_mismatch": ("derive each rank's output splits from what its peers send: exchange the counts first "
                       "(all_to_all_single of the input split sizes) instead of computing them locally"),
    "reduce_op_mismatch": "use the same ReduceOp on every rank",
    "root_mismatch": "pass the same src/dst (a global rank) on every rank",
    "order_mismatch": ("issue collectives in a deterministic order on every rank (do not iterate sets, "
                       "do not issue from several threads)"),
    "group_mismatch": "call new_group with the same ranks in the same order on every rank, members or not",
    "unmatched_p2p": "pair every send with a recv on the peer, in the same order",
    "tag_mismatch": "use the same tag on both sides (a constant per kind of message, not per step)",
    "non_member_call": ("issue the collective only on the group's members (if rank in ranks), with the "
                        "group the rank belongs to"),
    "semantic_mismatch": ("issue the same calls on every rank; a collective of your own among a framework's "
                          "(DDP's join(), FSDP's) must be issued on every rank or on a separate group"),
    "hang": "see the first divergence above; fix it and the hang goes",
    "deadlock": ("issue collectives on different groups in one global order on every rank; order point-to-point "
                 "calls so that one side sends first (or use isend/irecv with batch_isend_irecv)"),
}

# -- a torch internal's collectives, by the role the recorder gave them (torch_internals/) ---------
_FSDP = ("every rank must run the same FSDP modules in the same order, forward and backward (e.g. run "
         "an expert that got no tokens on an empty batch instead of skipping it)")
_SYNC_BN = ("run the same forward passes through SyncBatchNorm layers on every rank: a pass on some ranks "
            "only (evaluation, visualisation) belongs in eval() mode or on every rank")
_DCP = "call torch.distributed.checkpoint save/load on every rank of the group, with the same arguments"
BY_ROLE = {
    "FSDP unshard all-gather": _FSDP, "FSDP gradient reduce": _FSDP,
    "SyncBatchNorm statistics": _SYNC_BN, "SyncBatchNorm gradient": _SYNC_BN,
    "checkpoint planning": _DCP,
}

# -- what the program did, as the analysis or the lint saw it -------------------------------------
SAME_MICROBATCHES = ("every stage must run the same number of microbatches in a step: derive it from the global "
                     "batch (the same on every stage, e.g. broadcast by the first stage), or pad or drop the ragged "
                     "last batch")
SAME_PASSES = ("run the same passes on every rank of the group: a forward, evaluation or logging step that issues "
               "collectives (a layer that synchronises statistics, a metric all-reduce) inside `if rank == 0:` must "
               "run on every rank, or without collectives (eval() mode, a separate group)")
LOOK_AT_ROOT_CAUSES = ("the sequences line up: look at why the root-cause rank(s) stopped (their state and detail "
                       "below: what they raised, or where they were)")
SLOW_NOT_SKIPPED = ("the rank was still busy outside collectives when the job was killed (see where it was): a slow "
                    "or stuck rank rather than a skipped call; speed up or move that work out of the step (e.g. "
                    "asynchronous checkpointing), or raise the timeout")


def pass_the_group(ranks: str) -> str:
    """A collective on the default group that only a subgroup's ranks issue (`ranks`: 'ranks 0-1')."""
    return (f"pass the group the call is meant for (`group=` the one of {ranks}) on every rank that issues it: "
            "without `group=` a collective runs on the default group, whose other members never join it")


def branch_on_one_group(who: str, group: str) -> str:
    """Ranks that issued a collective the rest of their group never issues (a cross-group deadlock)."""
    return (f"{who} issued a collective the other members of group {group} never issue, while the rest went on "
            "to another group: a branch taken on some ranks only (e.g. `if rank == 0:` around a DTensor "
            "full_tensor() or a checkpoint) must run on every rank of that group, or on none")


def call_on_every_rank(call: str) -> str:
    """A call that issues collectives under a rank condition (`call`: its source, `dist.barrier()`)."""
    return f"call `{call}` on every rank (all members of its group), outside the branch"


def same_root(keyword: str) -> str:
    """A collective whose root (src/dst) each rank takes from its own rank or data."""
    return (f"pass the same `{keyword}` on every rank of the group: a constant, or one value decided on one rank "
            "and broadcast first")


def p2p_order() -> str:
    """Every rank sends first to its peer with a blocking call, then receives from it."""
    return ("let one side of each pair receive first (`if rank < peer: send, then recv; else: recv, then send`), "
            "or post both without blocking (`dist.isend`/`dist.irecv`, or `dist.batch_isend_irecv`) and wait on both")


def same_shape(splits: bool) -> str:
    """A collective of a tensor whose shape, or an all-to-all whose split sizes, one rank decided alone."""
    if splits:
        return ("exchange the counts first (`dist.all_to_all_single(recv_counts, send_counts)`) and pass what was "
                "received as `output_split_sizes`")
    return ("give every rank a tensor of the same shape: a fixed size (`torch.bincount(x, minlength=n)` with n the "
            "same everywhere, padding), or agree on the size first (`dist.all_reduce(size, op=MAX)`)")


def decide_alike(then: str) -> str:
    """A branch on this rank's own data (a loss, a batch): the ranks decide differently."""
    return ("decide on every rank alike: reduce the condition first (`flag = torch.tensor(float(cond)); "
            "dist.all_reduce(flag, op=dist.ReduceOp.MAX)`) and branch on `flag`; or " + then)


def same_iterations(then: str) -> str:
    """A loop that runs a per-rank number of times."""
    return ("give every rank the same number of iterations (pad or drop the data evenly, a DistributedSampler, "
            "or `with model.join():` for DDP); " + then)


def wrapped_forward(kind: str) -> str:
    return (f"run the {kind} model's forward on every rank (for one rank's own evaluation use the unwrapped "
            "module, `model.module`)")


def wrapped_backward() -> str:
    return ("run the backward on every rank as many times (the same number of batches everywhere, or "
            "`with model.join():` for DDP)")


WRAP_IN_DDP = "wrap the model in DDP on every rank (its constructor broadcasts the parameters)"


def fsdp_state(method: str) -> str:
    return f"call `model.{method}()` on every rank (write the file from rank 0 only, after it)"
