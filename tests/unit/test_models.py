"""pflrepro.models: the registry, output shapes, parameter-only models."""

import pytest
import torch
from torch import nn

from pflrepro import models
from pflrepro.models import MODELS, build_model

SHAPES = [(1, 8, 8), (1, 28, 28), (3, 32, 32)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("name", "options"), [
    ("mlp", {}), ("mlp", {"hidden": [16, 8]}), ("mlp", {"hidden": []}),
    ("cnn", {}), ("cnn", {"channels": [4, 8], "hidden": 16}),
])
def test_output_shape(name, options, shape):
    torch.manual_seed(0)
    model = build_model(name, shape, 7, **options)
    out = model(torch.randn(3, *shape))
    assert out.shape == (3, 7)
    assert list(model.buffers()) == []


@pytest.mark.parametrize("shape", SHAPES)
def test_mlp_without_hidden_is_linear(shape):
    model = build_model("mlp", shape, 5, hidden=[])
    c, h, w = shape
    params = dict(model.named_parameters())
    assert {k: tuple(v.shape) for k, v in params.items()} == {
        "net.1.weight": (5, c * h * w), "net.1.bias": (5,)}
    x = torch.randn(2, *shape)
    expected = x.flatten(1) @ params["net.1.weight"].T + params["net.1.bias"]
    torch.testing.assert_close(model(x), expected)


def test_cnn_flat_size():
    # 8x8 -> pool -> 4x4 -> pool -> 2x2; 64 channels: 256 features into the head
    model = build_model("cnn", (1, 8, 8), 10)
    assert model.head[0].in_features == 64 * 2 * 2
    assert build_model("cnn", (3, 32, 32), 10).head[0].in_features == 64 * 8 * 8


def test_unknown_model_raises():
    with pytest.raises(ValueError, match="unknown model 'resnet'"):
        build_model("resnet", (1, 8, 8), 10)


def test_model_with_buffers_rejected(monkeypatch):
    def with_bn(in_shape, num_classes):
        return nn.Sequential(nn.Flatten(), nn.BatchNorm1d(in_shape[1] * in_shape[2]),
                             nn.Linear(in_shape[1] * in_shape[2], num_classes))

    monkeypatch.setitem(models.MODELS, "bn", with_bn)
    with pytest.raises(ValueError, match="buffers"):
        build_model("bn", (1, 4, 4), 3)


def test_registry_names():
    assert set(MODELS) >= {"mlp", "cnn"}


def test_declared_options_match_the_builders():
    """MODEL_OPTIONS (what the config check reads) names exactly each builder's options."""
    import inspect

    from pflrepro.models import MODEL_OPTIONS

    assert set(MODEL_OPTIONS) == set(MODELS)
    for name, builder in MODELS.items():
        params = set(inspect.signature(builder).parameters) - {"in_shape", "num_classes"}
        assert params == set(MODEL_OPTIONS[name]), name


@pytest.mark.parametrize(("name", "convs"), [("vgg11", 8), ("vgg13", 10)])
def test_vgg_for_small_images(name, convs):
    torch.manual_seed(0)
    model = build_model(name, (3, 32, 32), 10)
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    assert sum(isinstance(m, nn.Conv2d) for m in model.modules()) == convs
    assert list(model.buffers()) == []  # no batch norm: parameter-only
    assert not any(getattr(m, "inplace", False) for m in model.modules())
    # 32x32 -> 1x1 after five pools: one linear head on 512 features
    assert dict(model.named_parameters())["head.1.weight"].shape == (10, 512)
    grey = build_model(name, (1, 32, 32), 10)
    assert grey(torch.randn(2, 1, 32, 32)).shape == (2, 10)
    with pytest.raises(ValueError, match="at least 32x32"):
        build_model(name, (1, 28, 28), 10)
