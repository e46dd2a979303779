"""FedAvg: clients train from the global model; the server averages by train size."""

import numpy as np
import pytest
import torch
from _alg_helpers import algorithm_factory
from _fl_helpers import B, W, assert_params_close, clone, make_engine, manual_sgd

from pflrepro.algorithms.base import NoHyper, parse_hyper
from pflrepro.algorithms.fedavg import FedAvg
from pflrepro.training.params import take, weighted_mean

_alg = algorithm_factory(FedAvg)


def test_init_is_global_model():
    e, alg = _alg()
    state = alg.init()
    assert_params_close(state["global"], e.init_params(), atol=0, rtol=0)
    assert state["opt"]["step"].shape == (3,)


def test_one_round_is_size_weighted_mean_of_local_models():
    # train sizes [4, 2, 3]: global = (4 θ0 + 2 θ1 + 3 θ2) / 9
    e, alg = _alg(lr=0.2)
    start = e.init_params()
    state, losses = alg.round(alg.init(), 1)
    locals_, refs = [], []
    for k in range(3):
        theta, loss = manual_sgd(start, e, k, 1, "local", e.steps_per_round(k), lr=0.2)
        locals_.append(theta)
        refs.append(loss)
    expected = {n: (4 * locals_[0][n] + 2 * locals_[1][n] + 3 * locals_[2][n]) / 9
                for n in (W, B)}
    assert_params_close(state["global"], expected)
    assert losses.tolist() == pytest.approx(refs, rel=1e-5)
    # clients' optimiser states advanced by their step counts (ceil(n/2): 2, 1, 2)
    assert state["opt"]["step"].tolist() == [2, 1, 2]


def test_optimizer_state_kept_per_client_across_rounds():
    # SGD with momentum: round 2 of client k continues its own momentum buffer
    e, alg = _alg(lr=0.1, momentum=0.9)
    state = alg.init()
    state, _ = alg.round(state, 1)
    g1 = {n: v.clone() for n, v in state["global"].items()}
    opt1 = {n: v.clone() for n, v in state["opt"].items()}
    state, _ = alg.round(state, 2)
    thetas = []
    for k in range(3):
        theta, _, _ = e.train_client(g1, take(opt1, k), k, 2)
        thetas.append(theta)
    stacked = {n: torch.stack([t[n] for t in thetas]) for n in (W, B)}
    assert_params_close(state["global"], weighted_mean(stacked, torch.tensor([4., 2., 3.])))
    # a fresh optimiser state would give a different model
    fresh = [e.train_client(g1, e.init_opt(g1), k, 2)[0] for k in range(3)]
    stacked = {n: torch.stack([t[n] for t in fresh]) for n in (W, B)}
    assert not torch.allclose(state["global"][W],
                              weighted_mean(stacked, e.train_sizes())[W])


def test_predict_is_global_for_every_client():
    e, alg = _alg()
    state, _ = alg.round(alg.init(), 1)
    x = e.data.x
    ref = e.probs(state["global"], x)
    for k in range(3):
        torch.testing.assert_close(alg.predict(state, k, x, 1), ref)


def test_parse_hyper():
    assert isinstance(parse_hyper(FedAvg, {}), NoHyper)
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        parse_hyper(FedAvg, {"finetune_epochs": 1})


def test_client_sampling_averages_the_participants_only():
    from _fl_helpers import make_data

    data = make_data(n_train=(4, 2, 3, 5), n_test=(1, 1, 1, 1))
    e = make_engine(data, client_fraction=0.5, lr=0.2)
    alg = FedAvg(e, parse_hyper(FedAvg, {}))
    state = alg.init()
    start, opt0 = clone(state["global"]), clone(state["opt"])
    chosen = e.participants(1)
    assert len(chosen) == 2
    state, losses = alg.round(state, 1)
    models = [manual_sgd(start, e, k, 1, "local", e.steps_per_round(k), lr=0.2)[0]
              for k in chosen]
    sizes = [e.n_train(k) for k in chosen]
    expected = {n: sum(s * m[n] for s, m in zip(sizes, models, strict=True)) / sum(sizes)
                for n in (W, B)}
    assert_params_close(state["global"], expected)
    others = [k for k in range(4) if k not in chosen]
    assert np.isnan(losses[others]).all() and not np.isnan(losses[chosen]).any()
    for k in others:  # their optimiser state did not move
        assert float(state["opt"]["step"][k]) == float(opt0["step"][k]) == 0.0
    assert all(float(state["opt"]["step"][k]) > 0 for k in chosen)
    # only the participants exchanged models (the engine's loop logs and resets this)
    assert e.traffic.up[chosen].tolist() == [e.model_size] * 2
    assert e.traffic.up[others].tolist() == [0.0, 0.0]
