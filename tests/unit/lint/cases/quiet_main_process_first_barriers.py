"""The older transformers examples' "main process first": every rank reaches exactly one of two barriers."""
import torch.distributed as dist


def load_and_cache(args, tokenizer):
    if args.local_rank not in [-1, 0]:
        dist.barrier()  # the others wait until the main process has built the cache
    features = build_features(args, tokenizer)
    if args.local_rank == 0:
        dist.barrier()  # the main process releases them
    return features


def build_features(args, tokenizer):
    return [tokenizer(x) for x in open(args.train_file)]
