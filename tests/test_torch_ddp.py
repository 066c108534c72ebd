"""DistributedDataParallel with cells.torch modules: examples/ddp_train.py run by torchrun as 2
processes (gloo, on 127.0.0.1 only) ends with the parameters of one process trained on the whole
global batches.

float64 to 1e-10: DDP's gradient is the average of the two shards' mean-loss gradients (an
all-reduced sum halved), the single process's the mean over the whole batch: the same sum in
another order, so the two runs differ by rounding only (at most 3e-17 here, after 4 SGD steps).
A wrong reduction is far away: a rank that trains on its shard alone (no average) ends 1e-4 to
1e-2 (per parameter tensor) from the right parameters. In float32 the rounding (eps 6e-8) would
need a tolerance within a few orders of magnitude of that; float64 keeps them apart by ten.

Teardown. gloo's worker threads can abort a process at exit ("terminate called without an
active exception"; seen with torch's own nn.LSTM under DDP) or, when DDP's reducer frees the
process group last, deadlock it (the example frees DDP first; see its comment). The example
saves its results, and every rank prints that it is done before a barrier and the teardown, so
a run that exits non-zero is accepted (with a warning) only when the result file is complete,
every rank printed that it is done, and every rank that wrote to stderr wrote the abort message
and no Python traceback. A run still going after TIMEOUT_S fails.
"""
import glob
import importlib.util
import os
import pathlib
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cells.torch")
if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ddp_train.py"
WORLD_SIZE = 2
STEPS = 4
TIMEOUT_S = 60
TOLERANCE = 1e-10
TEARDOWN_CRASH = "terminate called without an active exception"


def load_example():
    spec = importlib.util.spec_from_file_location("ddp_train", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def done_line(rank):
    return f"rank {rank}/{WORLD_SIZE}: trained {STEPS} steps"


def run_torchrun(tmp_path):
    """Run the example under torchrun on 127.0.0.1 (rendezvous, store and gloo's sockets);
    returns (exit status, torchrun's output, {rank: (stdout, stderr)}). A run still going after
    TIMEOUT_S is stopped and fails the test."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1",
               "--nproc_per_node", str(WORLD_SIZE), "--rdzv-backend", "c10d",
               "--rdzv-endpoint", "127.0.0.1:0", "--local-addr", "127.0.0.1",
               "--log-dir", str(tmp_path / "logs"), "--redirects", "3", "--shutdown-timeout", "5",
               str(EXAMPLE), "--steps", str(STEPS), "--dtype", "float64",
               "--out", str(tmp_path / "params.pt")]
    # The workers import the cells this process imported (an installed package, or a checkout
    # built in place), never the source tree as such: from an sdist or a wheel install, the
    # unbuilt sources have no compiled kernels.
    import cells
    cells_path = str(pathlib.Path(cells.__file__).resolve().parents[1])
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo",
               PYTHONPATH=os.pathsep.join([cells_path, os.environ.get("PYTHONPATH", "")]))
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        agent_output, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.terminate()  # torchrun stops its workers: SIGTERM, SIGKILL after 5 s
        try:
            agent_output, _ = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            agent_output, _ = process.communicate()
        pytest.fail(f"torchrun did not finish within {TIMEOUT_S} s:\n{agent_output}")
    logs = {}
    for rank in range(WORLD_SIZE):
        (directory,) = glob.glob(str(tmp_path / "logs" / "*" / "attempt_0" / str(rank)))
        logs[rank] = tuple(pathlib.Path(directory, name).read_text()
                           for name in ("stdout.log", "stderr.log"))
    return process.returncode, agent_output, logs


def teardown_crash_only(logs, result_complete):
    """Whether a failed run did all its work and failed only at teardown: the result file is
    complete, every rank printed that it is done, a rank that wrote to stderr wrote the
    teardown message and no traceback, and one did write it."""
    if not result_complete:
        return False
    if not all(done_line(rank) in stdout for rank, (stdout, _) in logs.items()):
        return False
    stderrs = [stderr for _, stderr in logs.values() if stderr.strip()]
    return bool(stderrs) and all(TEARDOWN_CRASH in s and "Traceback" not in s for s in stderrs)


def test_teardown_crash_only():
    """The acceptance rule for a non-zero exit takes only a teardown crash after finished work."""
    done = {rank: (done_line(rank) + " on 1 thread(s)\n", "") for rank in range(WORLD_SIZE)}
    crashed = dict(done)
    crashed[1] = (done[1][0], TEARDOWN_CRASH + "\n")
    assert teardown_crash_only(crashed, result_complete=True)
    assert not teardown_crash_only(crashed, result_complete=False)
    assert not teardown_crash_only(done, result_complete=True)
    unfinished = dict(crashed)
    unfinished[0] = ("step   0  loss 0.1\n", "")
    assert not teardown_crash_only(unfinished, result_complete=True)
    traceback = dict(crashed)
    traceback[0] = (done[0][0], "Traceback (most recent call last):\nRuntimeError: gloo\n")
    assert not teardown_crash_only(traceback, result_complete=True)
    traceback[1] = (done[1][0], "Traceback (most recent call last):\n" + TEARDOWN_CRASH)
    assert not teardown_crash_only(traceback, result_complete=True)


def test_ddp_equals_one_process_on_the_whole_batch(tmp_path):
    returncode, agent_output, logs = run_torchrun(tmp_path)
    result = tmp_path / "params.pt"
    if returncode != 0:
        report = "\n".join(f"rank {r} stdout:\n{out}\nrank {r} stderr:\n{err}"
                           for r, (out, err) in logs.items())
        assert teardown_crash_only(logs, result.exists()), (
            f"torchrun exited with {returncode}:\n{agent_output}\n{report}")
        warnings.warn(f"torchrun exited with {returncode} after the work, at teardown "
                      f"({TEARDOWN_CRASH!r}): accepted")
    for rank, (stdout, _) in logs.items():
        assert done_line(rank) + " on 1 thread(s)" in stdout  # torchrun's OMP_NUM_THREADS=1
    distributed = torch.load(result, weights_only=True)

    example = load_example()
    model = example.make_model(torch.float64)
    initial = {name: p.detach().clone() for name, p in model.state_dict().items()}
    example.train(model, STEPS, rank=0, world_size=1, dtype=torch.float64)
    single = model.state_dict()

    assert distributed.keys() == single.keys()
    for name, p in single.items():
        assert p.dtype == torch.float64
        assert (p - initial[name]).abs().max() > 1e-5, f"{name} did not train"
        torch.testing.assert_close(distributed[name], p, rtol=TOLERANCE, atol=TOLERANCE,
                                   msg=name)
