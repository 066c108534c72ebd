"""examples/char_lm.py: both backends train the same model to the same losses; the command line
runs with and without tqdm. examples/streaming.py: a stream served frame by frame gives the bits
of one whole-sequence call."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
TINY = ["--steps", "5", "--seq-len", "16", "--batch", "4", "--hidden", "32", "--threads", "1",
        "--corpus-kb", "4"]


def load_example(name):
    """examples/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def char_lm():
    """The example as a module; torch's thread count (which train() sets) restored after. Only
    char_lm needs torch: streaming.py runs on cells alone."""
    torch = pytest.importorskip("torch")
    module = load_example("char_lm")
    threads = torch.get_num_threads()
    yield module
    torch.set_num_threads(threads)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_backends_give_the_same_losses(char_lm, cell):
    # Both backends start from the same parameters (same seed, same initialisation) and run the
    # same float32 model; only the recurrent layers' summation order differs (cells' kernels
    # against ATen / oneDNN), by a few float32 roundings (6e-8 relative) per operation. Measured
    # here: the losses of the two backends differ by at most 1e-7 relative over these 5 steps
    # and 2e-7 over 40 steps (hidden 64, batch 8, seq-len 50), GRU and LSTM. 1e-5 leaves a 50x
    # margin; a wrong gradient (a missed term, a wrong gate) changes the parameters after the
    # first Adam step (each moves by about the learning rate, 2e-3) and the later losses by
    # orders of magnitude more.
    losses = {backend: char_lm.train(char_lm.parse_args(["--backend", backend, "--cell", cell,
                                                         *TINY]), log_every=0)[0]
              for backend in ("cells", "torch")}
    assert len(losses["cells"]) == 5
    np.testing.assert_allclose(losses["cells"], losses["torch"], rtol=1e-5)
    assert losses["cells"][-1] < losses["cells"][0] < np.log(256) + 0.1


def test_command_line_without_tqdm(char_lm, capsys, monkeypatch):
    monkeypatch.setattr(char_lm, "tqdm", None)
    char_lm.main(["--log-every", "2", *TINY])
    out = capsys.readouterr().out.splitlines()
    assert [line.split("  ")[0] for line in out[:3]] == ["step 2/5", "step 4/5", "step 5/5"]
    assert out[3].startswith("cells gru: 5 steps, final loss ") and "s per epoch" in out[3]


def test_command_line_with_tqdm(char_lm, capsys):
    pytest.importorskip("tqdm")
    char_lm.main(["--backend", "torch", "--cell", "lstm", *TINY])
    captured = capsys.readouterr()
    assert "tok/s" in captured.err and "loss=" in captured.err
    assert captured.out.startswith("torch lstm: 5 steps, final loss ")


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_streaming_equals_one_whole_sequence_call(cell, capsys):
    # The example's own check: 50 one-frame calls, the state carried in reused out= buffers,
    # against one call on the whole sequence, bit for bit.
    streaming = load_example("streaming")
    assert streaming.main(["--cell", cell, "--frames", "50", "--inputs", "8",
                           "--hidden", "16"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{cell}, 8 inputs, 16 units, 1 thread: 50 frames streamed"
    assert out[1].startswith("latency per frame: median ")
    assert out[2].endswith("bit for bit: yes")
