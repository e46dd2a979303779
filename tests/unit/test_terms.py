"""pflrepro.training.terms: gradient terms, by hand, per client and stacked."""

import torch

from pflrepro.training.terms import Offset, Proximal, add_terms

P = {"w": torch.tensor([[1.0, 2.0]]), "b": torch.tensor([0.5])}
A = {"w": torch.tensor([[0.0, 4.0]]), "b": torch.tensor([0.5])}
G = {"w": torch.tensor([[0.1, 0.1]]), "b": torch.tensor([1.0])}
P0, A0 = ({k: v.clone() for k, v in d.items()} for d in (P, A))


def test_proximal_by_hand():
    # g + 0.5 (p - a): w: 0.1 + 0.5 * [1, -2] = [0.6, -0.9]; b: 1 + 0 = 1
    out = Proximal(A, 0.5).add(P, G)
    torch.testing.assert_close(out["w"], torch.tensor([[0.6, -0.9]]))
    torch.testing.assert_close(out["b"], torch.tensor([1.0]))
    assert torch.equal(G["w"], torch.tensor([[0.1, 0.1]]))  # inputs untouched
    assert all(torch.equal(d[k], c[k]) for d, c in ((P, P0), (A, A0)) for k in d)


def test_proximal_is_the_plain_sum_bit_for_bit():
    gen = torch.Generator().manual_seed(5)
    p, a, g = ({"w": torch.randn(7, 300, generator=gen)} for _ in range(3))
    out = Proximal(a, 0.37).add(p, g)
    assert torch.equal(out["w"], g["w"] + 0.37 * (p["w"] - a["w"]))


def test_offset_and_order():
    shift = {"w": torch.tensor([[1.0, -1.0]]), "b": torch.tensor([2.0])}
    out = add_terms([Proximal(A, 0.5), Offset(shift)], P, G)
    torch.testing.assert_close(out["w"], torch.tensor([[1.6, -1.9]]))
    torch.testing.assert_close(out["b"], torch.tensor([3.0]))
    assert add_terms([], P, G) is G


def test_rows_of_stacked_terms_equal_per_client_terms():
    gen = torch.Generator().manual_seed(0)
    stacked_p = {"w": torch.randn(3, 1, 2, generator=gen), "b": torch.randn(3, 1, generator=gen)}
    stacked_g = {k: torch.randn(v.shape, generator=gen) for k, v in stacked_p.items()}
    anchors = {k: torch.randn(v.shape, generator=gen) for k, v in stacked_p.items()}
    per_client = Proximal(anchors, 0.3, per_client=True)
    whole = per_client.stacked(stacked_p).add(stacked_p, stacked_g)
    for i in range(3):
        one = per_client.row(i).add({k: v[i] for k, v in stacked_p.items()},
                                    {k: v[i] for k, v in stacked_g.items()})
        for k in one:
            assert torch.equal(whole[k][i], one[k])
    part = per_client.rows(1, 3).add({k: v[1:] for k, v in stacked_p.items()},
                                     {k: v[1:] for k, v in stacked_g.items()})
    for k in part:
        assert torch.equal(part[k], whole[k][1:])
    # a shared anchor broadcasts over the client dimension and is its own row
    shared = Proximal({k: v[0] for k, v in anchors.items()}, 0.3)
    assert shared.row(2) is shared
    broadcast = shared.stacked(stacked_p)
    assert broadcast.per_client and broadcast.anchor["w"].shape == (3, 1, 2)
    offset = Offset({k: v[0] for k, v in anchors.items()}).stacked(stacked_p)
    out = offset.add(stacked_p, stacked_g)
    assert torch.equal(out["b"], stacked_g["b"] + anchors["b"][0])
