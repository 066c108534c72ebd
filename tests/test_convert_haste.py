"""cells.convert's haste converters: haste's LSTM and GRU weights to and from torch.nn's, as
haste's to_native_weights and from_native_weights convert them. A torch.nn module on the
converted weights computes what the reference of haste's layer (tests/haste_reference.py)
computes on haste's, and the round trips give back the weights."""
import numpy as np
import pytest
from haste_reference import gru, lstm

from cells import convert

torch = pytest.importorskip("torch")

T, N, I, H = 4, 3, 5, 6


def draw(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(scale=0.5, size=s) for s in shapes]


def test_lstm_to_torch_runs_the_same_model():
    x, h0, c0, kernel, recurrent_kernel, bias = draw((T, N, I), (N, H), (N, H), (I, 4 * H),
                                                     (H, 4 * H), (4 * H,))
    w_ih, w_hh, b_ih, b_hh = convert.haste_lstm_to_torch(kernel, recurrent_kernel, bias)
    np.testing.assert_array_equal(b_ih, b_hh)   # haste's split: halves
    module = torch.nn.LSTM(I, H).double()
    with torch.no_grad():
        for name, value in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"),
                               (w_ih, w_hh, b_ih, b_hh)):
            getattr(module, name).copy_(torch.from_numpy(value))
    out, (hL, cL) = module(torch.from_numpy(x), (torch.from_numpy(h0)[None],
                                                  torch.from_numpy(c0)[None]))
    h, c = lstm(x, kernel, recurrent_kernel, bias, h0, c0)
    np.testing.assert_allclose(out.detach().numpy(), h, rtol=0, atol=1e-13)
    np.testing.assert_allclose(cL[0].detach().numpy(), c[-1], rtol=0, atol=1e-13)
    back = convert.haste_lstm_from_torch(w_ih, w_hh, b_ih, b_hh)
    for got, want in zip(back, (kernel, recurrent_kernel, bias)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)


def test_gru_to_torch_runs_the_same_model():
    x, h0, kernel, recurrent_kernel, bias, recurrent_bias = draw(
        (T, N, I), (N, H), (I, 3 * H), (H, 3 * H), (3 * H,), (3 * H,), seed=1)
    weights = convert.haste_gru_to_torch(kernel, recurrent_kernel, bias, recurrent_bias)
    module = torch.nn.GRU(I, H).double()
    with torch.no_grad():
        for name, value in zip(("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"),
                               weights):
            getattr(module, name).copy_(torch.from_numpy(value))
    out, _ = module(torch.from_numpy(x), torch.from_numpy(h0)[None])
    h = gru(x, kernel, recurrent_kernel, bias, recurrent_bias, h0)
    np.testing.assert_allclose(out.detach().numpy(), h, rtol=0, atol=1e-13)
    back = convert.haste_gru_from_torch(*weights)
    for got, want in zip(back, (kernel, recurrent_kernel, bias, recurrent_bias)):
        np.testing.assert_array_equal(got, want)


def test_from_torch_takes_a_module_s_tensors_and_sums_the_lstm_biases():
    module = torch.nn.LSTM(I, H)
    kernel, recurrent_kernel, bias = convert.haste_lstm_from_torch(
        module.weight_ih_l0, module.weight_hh_l0, module.bias_ih_l0, module.bias_hh_l0)
    assert kernel.dtype == np.float32 and kernel.shape == (I, 4 * H)
    want = (module.bias_ih_l0 + module.bias_hh_l0).detach().numpy()
    np.testing.assert_array_equal(bias[H:2 * H], want[2 * H:3 * H])   # haste's g is torch's g
    np.testing.assert_array_equal(bias[2 * H:3 * H], want[H:2 * H])   # and f


def test_shapes_are_checked_with_the_argument_named():
    with pytest.raises(ValueError, match=r"bias: expected shape \(24,\)"):
        convert.haste_lstm_to_torch(np.zeros((I, 4 * H)), np.zeros((H, 4 * H)), np.zeros(3))
    with pytest.raises(ValueError, match="recurrent_bias: expected shape"):
        convert.haste_gru_to_torch(np.zeros((I, 3 * H)), np.zeros((H, 3 * H)),
                                   np.zeros(3 * H), np.zeros(2 * H))
    with pytest.raises(ValueError, match="weight_hh"):
        convert.haste_gru_from_torch(np.zeros((3 * H, I)), np.zeros((3 * H, H + 1)))
