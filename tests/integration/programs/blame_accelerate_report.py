"""The evaluation report of blame_accelerate_summary.py, in a module of its own (as a project's
utils.py is): the errors of the whole validation set, gathered from every process."""
import torch


def validation_errors(model, batches) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        errors = torch.cat([(model(x) - y).abs().flatten() for x, y in batches])
    model.train()
    return errors


def write_report(accelerator, model, batches, path: str) -> float:
    """Every process's errors, gathered (a collective): the mean of the whole validation set."""
    errors = accelerator.gather(validation_errors(model, batches))  # @report_gather
    mean = errors.mean().item()
    if accelerator.is_main_process:
        with open(path, "w") as f:
            f.write(f"mean abs error {mean:.6f} over {errors.numel()} samples\n")
    return mean
