"""A character-level language model trained on the Python standard library's own source.

    python examples/char_lm.py --backend cells --cell gru          # one epoch, cells.torch.GRU
    python examples/char_lm.py --backend torch --cell gru          # the same with torch.nn.GRU
    python examples/char_lm.py --backend cells --cell lstm --steps 100 --hidden 128 --threads 1

The model is an embedding of the 256 byte values, a 2-layer GRU or LSTM (--cell) of --hidden
units and a linear head back to 256 logits, trained with Adam on next-byte cross entropy.
--backend cells runs the recurrent layers on cells' kernels (cells.torch.GRU / LSTM), --backend
torch on torch.nn.GRU / LSTM: the one line that differs is the class, and as both classes
initialise their parameters alike, the same --seed gives both the same model and, to float32
rounding, the same loss curve.

The corpus is the first --corpus-kb KiB of the standard library's top-level modules (the *.py
files beside os.py, sorted by name, concatenated as bytes): on every machine with Python, no
download. It is cut into --batch contiguous streams; a step trains on the next --seq-len bytes
of every stream (truncated backpropagation through time: the recurrent state carries over from
step to step, detached), so an epoch, one pass over the corpus, is
corpus bytes // (batch · seq-len) steps. --steps defaults to one epoch; more steps start
further epochs from the beginning with a zero state.

Progress: a tqdm bar with the loss and the tokens (bytes) per second when tqdm is installed
(`pip install "cells-rnn[examples]"`), else a line every --log-every steps. At the end: the
final loss, the tokens per second and the time per epoch (measured time per step x steps per
epoch).
"""
import argparse
import glob
import os
import sys
import time

import torch
from torch import nn

try:
    from tqdm import tqdm
except ImportError:
    tqdm = None

import cells.torch as ct

VOCABULARY = 256          # byte values
EMBEDDING = 64            # size of a byte's embedding, the first layer's input size
NUM_LAYERS = 2
LEARNING_RATE = 2e-3
RECURRENT_CLASSES = {("cells", "gru"): ct.GRU, ("cells", "lstm"): ct.LSTM,
                     ("torch", "gru"): nn.GRU, ("torch", "lstm"): nn.LSTM}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("cells", "torch"), default="cells")
    parser.add_argument("--cell", choices=("gru", "lstm"), default="gru")
    parser.add_argument("--steps", type=int, help="training steps (default: one epoch)")
    parser.add_argument("--seq-len", type=int, default=100)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--corpus-kb", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log-every", type=int, default=50,
                        help="steps between progress lines without tqdm")
    return parser.parse_args(argv)


def standard_library_corpus(kib):
    """The first `kib` KiB of the standard library's top-level *.py files, sorted by name and
    concatenated, as a uint8 tensor."""
    limit = 1024 * kib
    chunks, size = [], 0
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py"))):
        with open(path, "rb") as f:
            chunks.append(f.read(limit - size))
        size += len(chunks[-1])
        if size == limit:
            break
    return torch.frombuffer(bytearray(b"".join(chunks)), dtype=torch.uint8)


class CharLM(nn.Module):
    """Embedding [256, EMBEDDING] -> 2-layer recurrent_class (batch_first) -> Linear [256]."""

    def __init__(self, recurrent_class, hidden):
        super().__init__()
        self.embedding = nn.Embedding(VOCABULARY, EMBEDDING)
        self.rnn = recurrent_class(EMBEDDING, hidden, num_layers=NUM_LAYERS, batch_first=True)
        self.head = nn.Linear(hidden, VOCABULARY)

    def forward(self, tokens, state=None):
        """tokens [bS, sL] (int64) and the recurrent state (None: zeros) -> (logits [bS, sL,
        256], the final state)."""
        output, state = self.rnn(self.embedding(tokens), state)
        return self.head(output), state


def streams(corpus, batch):
    """The corpus as `batch` contiguous streams [batch, n] (int64; the tail is dropped)."""
    n = len(corpus) // batch
    return corpus[:batch * n].view(batch, n).long()


def detached(state):
    return tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()


class Progress:
    """The loss and the tokens per second: a tqdm bar, or without tqdm a line every
    `log_every` steps (log_every=0: silent)."""

    def __init__(self, steps, tokens_per_step, log_every):
        self.steps, self.tokens_per_step, self.log_every = steps, tokens_per_step, log_every
        self.bar = (tqdm(total=steps * tokens_per_step, unit="tok", unit_scale=True)
                    if tqdm is not None and log_every else None)
        self.start = time.perf_counter()

    def update(self, step, loss):
        if self.bar is not None:
            self.bar.update(self.tokens_per_step)
            self.bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        elif self.log_every and (step % self.log_every == 0 or step == self.steps):
            rate = step * self.tokens_per_step / (time.perf_counter() - self.start)
            print(f"step {step}/{self.steps}  loss {loss:.4f}  {rate:,.0f} tokens/s", flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def train(args, log_every=None):
    """Train as the arguments say; returns (the loss of every step, the steps of one epoch,
    the seconds per step). log_every overrides args.log_every (0: no progress output)."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    data = streams(standard_library_corpus(args.corpus_kb), args.batch)
    steps_per_epoch = (data.shape[1] - 1) // args.seq_len
    if steps_per_epoch == 0:
        raise ValueError(f"--corpus-kb {args.corpus_kb} is too small for --batch {args.batch} "
                         f"and --seq-len {args.seq_len}: no step fits in one epoch")
    steps = steps_per_epoch if args.steps is None else args.steps
    model = CharLM(RECURRENT_CLASSES[args.backend, args.cell], args.hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    loss_function = nn.CrossEntropyLoss()
    progress = Progress(steps, args.batch * args.seq_len,
                        args.log_every if log_every is None else log_every)
    losses, state = [], None
    start = time.perf_counter()
    for step in range(steps):
        offset = (step % steps_per_epoch) * args.seq_len
        if offset == 0:
            state = None
        inputs = data[:, offset:offset + args.seq_len]
        targets = data[:, offset + 1:offset + args.seq_len + 1]
        logits, state = model(inputs, state)
        state = detached(state)
        loss = loss_function(logits.reshape(-1, VOCABULARY), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        progress.update(step + 1, losses[-1])
    seconds_per_step = (time.perf_counter() - start) / steps
    progress.close()
    return losses, steps_per_epoch, seconds_per_step


def main(argv=None):
    args = parse_args(argv)
    losses, steps_per_epoch, seconds_per_step = train(args)
    tokens_per_step = args.batch * args.seq_len
    print(f"{args.backend} {args.cell}: {len(losses)} steps, final loss {losses[-1]:.4f}, "
          f"{tokens_per_step / seconds_per_step:,.0f} tokens/s, "
          f"{seconds_per_step * steps_per_epoch:.1f} s per epoch ({steps_per_epoch} steps of "
          f"{tokens_per_step} tokens, {args.threads} threads)")


if __name__ == "__main__":
    sys.exit(main())
