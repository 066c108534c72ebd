"""PyTorch modules on cells' kernels: drop-in torch.nn.GRU, LSTM, RNN, their cells, and the LLTM.

    GRU, LSTM, RNN                subclasses of torch.nn.GRU, LSTM, RNN
    GRUCell, LSTMCell, RNNCell    subclasses of torch.nn.GRUCell, LSTMCell, RNNCell
    LLTM(input_features, state_size)   the LLTM of PyTorch's C++-extension tutorial
    convert(module)               a torch.nn recurrent module (or every one inside a model) as
                                  the cells-backed class, with the same parameters
    quantize_dynamic(model, ...)  the recurrent modules of a model as inference modules on
                                  cells' int8 or bfloat16 prepared nets (torch.ao's
                                  quantize_dynamic for RNNs, proj_size included)

The modules keep torch's constructors, parameters (names, shapes, initialisation), state_dicts,
repr and pickling, and only replace forward: it takes and returns what torch's does (batched
[sL, bS, nIn] or batch_first [bS, sL, nIn], unbatched [sL, nIn], PackedSequence, optional hx)
and runs each layer and direction as one call of cells' time loop (the reverse direction with
forward=False, a packed batch with seq_len: no per-step or per-length Python), with torch's
dropout between layers in training mode. torch's GRU is cells' linear_before_reset GRU; the
RNN's nonlinearity is cells' activation, and the LSTM's proj_size > 0 is cells' projection
(Wproj = weight_hrᵀ).

Tensors are float32 or float64, on the CPU or on a CUDA device. On the CPU the kernels read
them as NumPy arrays sharing their memory (tensor.numpy(); a strided one is copied by the
kernel, except the transposes of torch's weight_ih and weight_hh, which the time loop reads
where they are, writing their gradients in torch's layout; weight_hr's is copied, and its
gradient copied back into weight_hr's layout), their
results become tensors without a copy (torch.from_numpy), and every call runs on the threads
cells chooses for its size (n_threads=None), at most torch.get_num_threads(): torch's count is
a ceiling, not a demand that a call too small to gain from a second thread would pay for. The
time loops run on OpenMP's pool, which torch's own operators run on, so that the two take turns
on one pool (cells._threads.on_openmp_pool). CUDA
tensors run on cells' GPU backend (CuPy, cells[gpu]) as
CuPy arrays sharing their memory through DLPack, both ways, with CuPy's device and stream set to
the tensor's device and torch's current stream on it: cells' kernels and cuBLAS calls queue
behind and before torch's own work, as a torch operator's would. Another dtype or device, or a
call mixing CPU and CUDA tensors, is a TypeError naming the argument.

Inference. A CPU call that needs no gradient (under torch.no_grad() or torch.inference_mode(),
or with no tensor that requires grad) runs each layer and direction on a prepared net
(cells.gru.prepare, ...: the weights validated and packed once), kept on the module and
prepared again when one of its weights changed: its version counter moved (an optimizer step,
load_state_dict, an in-place write under no_grad) or it is another tensor (.to(), .double(),
a new Parameter, ``param.data = t``). A write through ``param.data`` is not seen (autograd does
not count it either): write under torch.no_grad() instead. A reverse direction runs forward on
each row's steps reversed (a packed batch's rows each over their own length), its outputs put
back in time order; a layer's two directions run at once, each on half of torch's threads
(cells._prepared.call_together). The nets are not pickled or copied with the module; weights
that are inference tensors (a module made under inference_mode: no version counter), CUDA
tensors and torch.compile run on the time loop operators below. The common call (a stack's
batched 3-D input, a cell's or the LLTM's 2-D one, hx None or CPU tensors of the input's dtype
and of the shapes torch expects) is checked in a few comparisons and runs straight on the nets;
any other goes through the full checks, which raise torch's errors.

Autograd and torch.compile. Each time loop is a custom operator (torch.library, namespace
"cells"), with a fake (meta) implementation and a backward formula, all generated from the
family's declaration (cells/_families/: its arguments, outputs and workspace, and what the
operator adds, Family.torch; cells/torch/_operators.py):

    cells::gru_time_loop(x, hI, Wx, Wh, b, seq_len, forward, keep_workspace) -> (h, gates, hc)
    cells::lstm_time_loop(x, Wx, Wr, b, hI, cI, Wproj, seq_len, forward, keep_workspace)
        -> (h, hL, cL, c, gates, m)
    cells::lltm_time_loop(x, W, b, hI, cI, seq_len, forward, keep_workspace)
        -> (h, hL, cL, gates, c)
    cells::rnn_time_loop(x, hI, Wx, Wh, b, activation, seq_len, forward, keep_workspace)
        -> (h, gates)

Arguments and outputs are those of cells.gruTimeLoop (linear_before_reset=True), lstmLayerTimeLoop
(no peepholes, no clipping), lltmTimeLoop and rnnTimeLoop, in cells' layout (x time-major [sL, bS,
nIn], Wx [nIn, G·nOut], ...), followed by the training workspace (cells' GruWorkspace, ... arrays
as tensors; empty tensors with keep_workspace=False). The backward of each is the operator
cells::<family>_time_loop_backward, which runs cells' *TimeLoopBp on the saved workspace: the Bp
consumes (overwrites) the gates, so it gets a copy of them, and backward(retain_graph=True) can run
twice. Without a kept workspace it recomputes the forward pass. Its last argument, input_grad, is
whether x needs a gradient: without, dL/dx is not computed (an empty tensor). The modules call
these operators, so torch.compile(model, fullgraph=True) traces models that use them.

Double backward (backward(create_graph=True) or autograd.grad(create_graph=True), then a
derivative of the gradients: gradient penalties, Hessian-vector products, meta-learning). Each
backward operator has an autograd formula of its own, exact to rounding: it recomputes the time
loop in plain torch operations (cells/torch/_recompute.py, one Python iteration per step, in
cells' layout and with its seq_len and direction), takes its first derivatives with
create_graph=True and differentiates them by the incoming gradients. Its results are
differentiable in turn, to any order. It costs a forward and two backward passes of that Python
loop, far slower than the kernels, and only where a second derivative is taken: a plain backward
runs the backward operators with grad mode off, which records nothing for them.

torch._dynamo refuses to trace any instance of torch.nn.GRU, LSTM or RNN unless
torch._dynamo.config.allow_rnn is set; importing cells.torch sets it (for torch's own RNN
modules too, which dynamo then traces instead of breaking the graph).
"""

import torch._dynamo

from cells.torch._convert import convert
from cells.torch._modules import GRU, LLTM, LSTM, RNN, GRUCell, LSTMCell, RNNCell
from cells.torch._quantized import quantize_dynamic

__all__ = ["GRU", "LSTM", "RNN", "GRUCell", "LSTMCell", "RNNCell", "LLTM", "convert",
           "quantize_dynamic"]

torch._dynamo.config.allow_rnn = True

# The public names are cells.torch's wherever they are defined: in reprs, the docs and pickles.
for _public in (GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell, LLTM, convert, quantize_dynamic):
    _public.__module__ = __name__
del _public
