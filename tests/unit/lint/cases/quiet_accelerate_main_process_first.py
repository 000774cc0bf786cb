"""`with accelerator.main_process_first():` is entered by every process; rank-0-only work inside it is fine."""
from accelerate import Accelerator
from datasets import load_dataset


def build(tokenizer):
    accelerator = Accelerator()
    with accelerator.main_process_first():
        raw = load_dataset("imdb", split="train")
        tokenized = raw.map(lambda b: tokenizer(b["text"], truncation=True), batched=True)
    if accelerator.is_main_process:
        print(tokenized)
    return tokenized
