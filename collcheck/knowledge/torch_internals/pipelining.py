"""torch.distributed.pipelining (torch 2.13: pipelining/schedules.py, stage.py). Every send and
recv of a schedule is issued from `_batch_p2p(p2p_ops, desc)`, whose `desc` says forward or
backward and which way (GPipe, 1F1B; runtime schedules pass none); the schedule's
`_step_microbatches` frame has the stage (`self._stage`, or `self._stages`) and the number of
microbatches of this step (`self._n_microbatches`); runtime schedules (Interleaved1F1B, LoopedBFS,
ZeroBubble, DualPipeV) issue each action from the nested `_perform_action(action)`, whose
`action` has the stage, the microbatch and the kind (SEND_F, RECV_B, ...). A stage's set-up
(the warm-up vote and shape metadata of its first step) comes from stage.py."""

_SCHEDULES = "distributed/pipelining/schedules.py"
_STAGE = "distributed/pipelining/stage.py"

ROLES: dict = {}
PHASES: dict = {}
ENTRY_POINTS = {(_SCHEDULES, "step"): "pipeline schedule step()"}

_DIRECTIONS = {
    "fwd_recv": "forward recv (activation)", "fwd_send": "forward send (activation)",
    "bwd_recv": "backward recv (gradient)", "bwd_send": "backward send (gradient)",
    "fwd_send_bwd_recv": "forward send (activation) + backward recv (gradient)",
    "bwd_send_fwd_recv": "backward send (gradient) + forward recv (activation)",
}


def _microbatches(desc: str, schedule) -> list[int | None]:
    """The microbatch of each half of a batch `desc` names (send first, as `desc` says), read from
    the single-stage schedule's `_step_microbatches` frame (`schedule`: its locals), or None.
    GPipe and forward-only loop with `i`. Schedule1F1B counts with fwd_mb_index / bwd_mb_index,
    each bumped right after the chunk's compute: a recv is for the current index, a forward send
    in a batch with a backward recv for the one before; a backward send is always for the chunk
    whose backward ran last, the one before the oldest forward still cached (`fwd_cache`: added by
    forward_one_chunk, popped by backward_one_chunk, stage.py)."""
    halves = desc.split("_send_")
    if "i" in schedule:
        return [schedule["i"]] * len(halves)
    fwd, bwd = schedule.get("fwd_mb_index"), schedule.get("bwd_mb_index")
    if fwd is None or bwd is None:
        return [None] * len(halves)
    stage = schedule["self"]._stage
    last_backward = min(stage.fwd_cache, default=fwd) - 1
    by_desc = {"fwd_recv": [fwd], "bwd_recv": [bwd], "fwd_send": [fwd], "bwd_send": [last_backward],
               "fwd_send_bwd_recv": [fwd - 1, bwd], "bwd_send_fwd_recv": [bwd - 1, fwd]}
    return by_desc.get(desc, [None] * len(halves))


def _direction(frame) -> str | None:
    """'forward send (activation) of microbatch 2 + backward recv (gradient) of microbatch 0': each
    half of the batch `_batch_p2p` issues, with its microbatch where the schedule's frame (the
    caller, or the caller of `_sorted_batch_p2p`) says."""
    desc = frame.f_locals.get("desc")
    text = _DIRECTIONS.get(desc)
    if text is None:
        return None
    caller = frame.f_back
    if caller is not None and caller.f_code.co_name == "_sorted_batch_p2p":
        caller = caller.f_back
    if caller is None or caller.f_code.co_name != "_step_microbatches":
        return text
    numbers = _microbatches(desc, caller.f_locals)
    return " + ".join(half if mb is None else f"{half} of microbatch {mb}"
                      for half, mb in zip(text.split(" + "), numbers, strict=False))


def _step(local: dict) -> str:
    """The schedule's step: which stage(s) this rank runs, of how many, over how many microbatches."""
    schedule = local["self"]
    stage = getattr(schedule, "_stage", None)
    if stage is not None:
        which = f"stage {stage.stage_index} of {stage.num_stages}"
    else:
        stages = schedule._stages
        which = f"stages {', '.join(str(s.stage_index) for s in stages)} of {stages[0].num_stages}"
    return f"pipeline {which}, {schedule._n_microbatches} microbatches"


def _action(local: dict) -> str:
    a = local["action"]
    return f"{a.computation_type} of stage {a.stage_index}, microbatch {a.microbatch_index}"


def _fixed(text: str):
    return lambda local: text


FRAME_DETAILS = {(_SCHEDULES, "_batch_p2p"): _direction}
DETAILS = {
    (_SCHEDULES, "_perform_action"): _action,
    (_STAGE, "_send_meta"): _fixed("set-up: shape metadata"),
    (_STAGE, "_recv_meta"): _fixed("set-up: shape metadata"),
    (_STAGE, "_warmup_forward_vote"): _fixed("set-up: warm-up vote"),
    (_STAGE, "_warmup_backward_result"): _fixed("set-up: warm-up vote"),
}
ENTRY_DETAILS = {(_SCHEDULES, "_step_microbatches"): _step}
