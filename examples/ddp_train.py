"""Data-parallel training of a cells.torch LSTM with DistributedDataParallel (gloo, CPU).

One machine, two processes:

    torchrun --nproc_per_node=2 examples/ddp_train.py [--steps 20] [--dtype float32] [--out p.pt]

The model is a 2-layer cells.torch LSTM and a linear head that regresses a number from a
sequence [sL, nIn] (batch_first: x [bS, sL, nIn], target [bS, 1]). The data are deterministic:
step k's global batch of GLOBAL_BATCH sequences comes from a generator seeded with k, and rank r
of world size W trains on its contiguous shard of GLOBAL_BATCH / W of them. Every rank builds the
model from the same seed and DDP broadcasts rank 0's parameters, so all ranks start equal; each
step DDP averages the gradients of the ranks' mean losses, which is the gradient of the mean loss
over the whole global batch, so W processes follow the path one process takes on whole batches.

torchrun sets OMP_NUM_THREADS=1 in each process (unless it is set), and cells.torch runs on
torch.get_num_threads() threads. Rank 0 prints the global loss of each step and, with --out,
saves the trained parameters (model.state_dict(), written to a temporary name and renamed, so
the file is complete once it exists); every rank then prints that it is done, and only after a
barrier (all ranks have printed) is the process group torn down.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import cells.torch as ct

SEED = 0
nIn, H, sL, GLOBAL_BATCH = 4, 16, 12, 32
LEARNING_RATE = 0.1
DTYPES = {"float32": torch.float32, "float64": torch.float64}


class Regressor(torch.nn.Module):
    """A 2-layer cells.torch LSTM and a linear head on its last output: x [bS, sL, nIn] ->
    [bS, 1]."""

    def __init__(self, dtype):
        super().__init__()
        self.lstm = ct.LSTM(nIn, H, num_layers=2, batch_first=True, dtype=dtype)
        self.head = torch.nn.Linear(H, 1, dtype=dtype)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.head(y[:, -1])


def make_model(dtype):
    """The model with the initial parameters every rank (and a single process) starts from."""
    torch.manual_seed(SEED)
    return Regressor(dtype)


def global_batch(step, dtype):
    """Step `step`'s global batch: x [GLOBAL_BATCH, sL, nIn] and target [GLOBAL_BATCH, 1], the
    mean over time of sin(x0 + x1) (x0, x1 the first two input features)."""
    generator = torch.Generator().manual_seed(step)
    x = torch.randn(GLOBAL_BATCH, sL, nIn, generator=generator, dtype=dtype)
    target = torch.sin(x[:, :, 0] + x[:, :, 1]).mean(1, keepdim=True)
    return x, target


def shard(tensor, rank, world_size):
    """Rank `rank`'s contiguous part of a global batch (its first dimension)."""
    size = GLOBAL_BATCH // world_size
    return tensor[rank * size:(rank + 1) * size]


def train(model, steps, rank, world_size, dtype, log=None):
    """SGD on the mean squared error of rank `rank`'s shards of the global batches of steps
    0..steps-1 (model: DDP-wrapped when world_size > 1). log(step, loss) gets each step's loss
    on the shard."""
    if GLOBAL_BATCH % world_size:
        raise ValueError(f"world_size: expected a divisor of the global batch {GLOBAL_BATCH}, "
                         f"got {world_size}")
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    for step in range(steps):
        x, target = (shard(t, rank, world_size) for t in global_batch(step, dtype))
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        optimizer.step()
        if log is not None:
            log(step, loss.detach())


def save(state_dict, path):
    """torch.save to a temporary name, then rename: `path` exists only once it is complete."""
    partial = f"{path}.partial"
    torch.save(state_dict, partial)
    os.replace(partial, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--out", help="rank 0 saves the trained parameters here (torch.save)")
    args = parser.parse_args()
    dtype = DTYPES[args.dtype]

    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    model = DistributedDataParallel(make_model(dtype))

    def log(step, loss):
        dist.all_reduce(loss)
        if rank == 0:
            print(f"step {step:3d}  loss {loss.item() / world_size:.6f}", flush=True)

    train(model, args.steps, rank, world_size, dtype, log)
    if rank == 0 and args.out:
        save(model.module.state_dict(), args.out)
    print(f"rank {rank}/{world_size}: trained {args.steps} steps on "
          f"{torch.get_num_threads()} thread(s)", flush=True)
    dist.barrier()
    # Free DDP before the process group. gloo's worker threads finish a collective launched in
    # a backward pass by dropping a Python object (autograd's context), which takes the GIL;
    # DDP's reducer, freed last, would join those threads while holding the GIL (a deadlock),
    # whereas torch's ProcessGroup, freed last by destroy_process_group, releases it first.
    del model
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
