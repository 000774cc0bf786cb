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


def _direction(local: dict) -> str | None:
    return _DIRECTIONS.get(local.get("desc"))


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


DETAILS = {
    (_SCHEDULES, "_batch_p2p"): _direction,
    (_SCHEDULES, "_perform_action"): _action,
    (_STAGE, "_send_meta"): _fixed("set-up: shape metadata"),
    (_STAGE, "_recv_meta"): _fixed("set-up: shape metadata"),
    (_STAGE, "_warmup_forward_vote"): _fixed("set-up: warm-up vote"),
    (_STAGE, "_warmup_backward_result"): _fixed("set-up: warm-up vote"),
}
ENTRY_DETAILS = {(_SCHEDULES, "_step_microbatches"): _step}
