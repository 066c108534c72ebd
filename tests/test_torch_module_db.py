"""torch's own module tests for its recurrent modules, run on cells.torch's: every input of the
module_db entries of nn.GRU, LSTM, RNN, GRUCell, LSTMCell and RNNCell (the generators of
torch.testing._internal.common_modules, with the packed sequences of torch's test_rnn_modules),
in float32 and float64, in training and in eval mode, through the cells.torch class and torch's
with the same state_dict: outputs, final states and the gradients of the inputs, the initial
states and every parameter. Their error inputs raise what torch's test_errors expects.

The inputs are make_tensor's, uniform in [-9, 9] (saturated gates; relu RNN results and
gradients up to ~70), with at most 10 units, 5 steps and 2 layers. Both sides compute the same
math in other summation orders. float64 to 1e-10 (rtol and atol): rounding ~1e-16 relative per
operation; the largest difference here is 3e-15 relative to 1 + |value|. float32 to 2e-5: the
same at eps 6e-8; the largest difference here is 4.2e-6 relative to 1 + |value| (a relu RNN).

The modules run on one thread (torch.set_num_threads(1), restored afterwards): the inputs
are tiny (bS <= 5, H <= 10), where synchronising threads at every step costs more than the work
(here, on 2 busy cores: ~20 ms per time loop on 2 threads against ~0.2 ms on one).

Importing common_modules imports torch.testing._internal.common_utils, which calls
torch.backends.disable_global_flags(): for the rest of the test session, torch.backends flags
can be changed only with their flags() context managers.
"""
import re

import pytest

torch = pytest.importorskip("torch")
ct = pytest.importorskip("cells.torch")
pytest.importorskip("expecttest")  # common_utils needs it

from torch.nn.utils.rnn import PackedSequence  # noqa: E402
from torch.testing._internal.common_modules import ModuleErrorEnum, module_db  # noqa: E402

CELLS_CLASSES = {torch.nn.GRU: ct.GRU, torch.nn.LSTM: ct.LSTM, torch.nn.RNN: ct.RNN,
                 torch.nn.GRUCell: ct.GRUCell, torch.nn.LSTMCell: ct.LSTMCell,
                 torch.nn.RNNCell: ct.RNNCell}
MODULE_INFOS = [info for info in module_db if info.module_cls in CELLS_CLASSES]
assert {info.module_cls for info in MODULE_INFOS} == set(CELLS_CLASSES)
TOLERANCE = {torch.float64: dict(rtol=1e-10, atol=1e-10),
             torch.float32: dict(rtol=2e-5, atol=2e-5)}


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny shapes (conftest.py)


def module_inputs(info, dtype, training):
    """The ModuleInputs torch tests for `info` (with its packed sequences), from a fixed seed."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True,
                                       training=training, with_packed_sequence=True)


def describe(module_input):
    """The constructor and forward arguments of a ModuleInput, in words."""
    def shapes(a):
        if isinstance(a, PackedSequence):
            return f"PackedSequence(batch_sizes={a.batch_sizes.tolist()})"
        if isinstance(a, torch.Tensor):
            return f"[{', '.join(map(str, a.shape))}]"
        return f"({', '.join(shapes(b) for b in a)})" if isinstance(a, tuple) else repr(a)
    constructor = module_input.constructor_input
    arguments = [repr(a) for a in constructor.args]
    arguments += [f"{k}={v!r}" for k, v in constructor.kwargs.items()]
    return f"({', '.join(arguments)}) on {', '.join(map(shapes, module_input.forward_input.args))}"


INPUTS = {(info.name, dtype, training): module_inputs(info, dtype, training)
          for info in MODULE_INFOS
          for dtype in (torch.float32, torch.float64)
          for training in (True, False)}
CASES = [pytest.param(info, dtype, training, index,
                      id=f"{info.name}-{str(dtype)[6:]}-{'train' if training else 'eval'}-{index}")
         for info in MODULE_INFOS
         for dtype in (torch.float32, torch.float64)
         for training in (True, False)
         for index in range(len(INPUTS[info.name, dtype, training]))]


def leaf_copies(value, leaves):
    """value (tensors, tuples of them, PackedSequences) with every tensor that requires grad
    replaced by a detached copy that requires grad, appended to leaves."""
    if isinstance(value, PackedSequence):
        return value._replace(data=leaf_copies(value.data, leaves))
    if isinstance(value, tuple):
        return tuple(leaf_copies(v, leaves) for v in value)
    if isinstance(value, torch.Tensor) and value.requires_grad:
        leaves.append(value.detach().clone().requires_grad_())
        return leaves[-1]
    return value


def flat(value):
    """The tensors of a module's result (a PackedSequence's data), in order."""
    if isinstance(value, PackedSequence):
        return [value.data]
    if isinstance(value, tuple):
        return [t for v in value for t in flat(v)]
    return [value]


def build(info, cells_class, module_input, dtype, training):
    """torch's module as torch's tests build it, and the cells.torch one with its state_dict."""
    args, kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
    torch.manual_seed(0)
    reference = info.module_cls(*args, **kwargs).to(dtype).train(training)
    module = cells_class(*args, **kwargs).to(dtype).train(training)
    module.load_state_dict(reference.state_dict())
    return reference, module


@pytest.mark.parametrize("info, dtype, training, index", CASES)
def test_module_input(info, dtype, training, index):
    module_input = INPUTS[info.name, dtype, training][index]
    reference, module = build(info, CELLS_CLASSES[info.module_cls], module_input, dtype,
                              training)
    forward_args = module_input.forward_input.args
    assert not module_input.forward_input.kwargs

    runs = []
    for m in (reference, module):
        leaves = []
        runs.append((leaves, flat(m(*leaf_copies(forward_args, leaves)))))
    (leaves1, outputs1), (leaves2, outputs2) = runs
    assert len(outputs1) == len(outputs2)
    torch.manual_seed(1)
    weights = [torch.randn_like(o) for o in outputs1]
    for outputs in (outputs1, outputs2):
        sum((w * o).sum() for w, o in zip(weights, outputs)).backward()

    tol = TOLERANCE[dtype]
    case = f"{info.name}{describe(module_input)}"
    for k, (a, b) in enumerate(zip(outputs1, outputs2)):
        torch.testing.assert_close(b, a, **tol, msg=lambda m: f"{case}: result {k}: {m}")
    for k, (a, b) in enumerate(zip(leaves1, leaves2)):
        torch.testing.assert_close(b.grad, a.grad, **tol,
                                   msg=lambda m: f"{case}: gradient of input {k}: {m}")
    for (name, p), q in zip(reference.named_parameters(), module.parameters()):
        torch.testing.assert_close(q.grad, p.grad, **tol,
                                   msg=lambda m: f"{case}: gradient of {name}: {m}")


def module_error_inputs(info, dtype):
    """The ErrorModuleInputs torch's test_errors runs for `info`."""
    return info.module_error_inputs_func(info, device="cpu", dtype=dtype, requires_grad=False,
                                         training=True)


ERROR_CASES = [pytest.param(info, dtype, index, id=f"{info.name}-{str(dtype)[6:]}-{index}")
               for info in MODULE_INFOS
               for dtype in (torch.float32, torch.float64)
               for index, _ in enumerate(module_error_inputs(info, dtype))]


@pytest.mark.parametrize("info, dtype, index", ERROR_CASES)
def test_module_error_input(info, dtype, index):
    """torch's error inputs: the exception type and message torch's test_errors expects."""
    error_input = module_error_inputs(info, dtype)[index]
    module_input = error_input.module_error_input
    constructor = module_input.constructor_input
    cells_class = CELLS_CLASSES[info.module_cls]
    raises = pytest.raises(error_input.error_type, match=re.compile(error_input.error_regex))
    if error_input.error_on == ModuleErrorEnum.CONSTRUCTION_ERROR:
        with raises:
            cells_class(*constructor.args, **constructor.kwargs)
    else:
        module = cells_class(*constructor.args, **constructor.kwargs)
        with raises:
            module(*module_input.forward_input.args, **module_input.forward_input.kwargs)
