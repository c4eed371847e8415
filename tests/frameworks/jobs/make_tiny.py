"""Build the tier's tiny model, tokenizer and data in a folder, offline (no downloads).

    python make_tiny.py OUT

OUT/model: a GPT-2 with 2 layers of width 32 and a word-level tokenizer trained here on
OUT/data/train.txt, a few hundred lines of generated arithmetic sentences.
"""

import random
import sys
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        a, b = rng.randrange(5), rng.randrange(5)
        out.append(f"{WORDS[a]} plus {WORDS[b]} is {WORDS[a + b]} .")
    return out


def main(out: Path) -> None:
    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    lines = sentences(400, seed=0)
    (data / "train.txt").write_text("\n".join(lines) + "\n")
    tokenizer = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.train_from_iterator(lines, trainers.WordLevelTrainer(special_tokens=["[UNK]", "[PAD]", "[EOS]"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]",
                                   eos_token="[EOS]", bos_token="[EOS]")
    fast.save_pretrained(out / "model")
    config = GPT2Config(vocab_size=len(fast), n_positions=32, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id, pad_token_id=fast.pad_token_id)
    GPT2LMHeadModel(config).save_pretrained(out / "model")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
