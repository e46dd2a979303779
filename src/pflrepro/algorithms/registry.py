"""What every algorithm is, importable without torch: name, summary, hyperparameters.

Validating a config, generating its schema and parsing the workflow need each
algorithm's name, one-line summary and ``Hyper`` dataclass, but none of its training
code, which imports torch (seconds per Snakemake parse and per job). So those live
here, in :data:`INFOS`; each algorithm's own module
(``pflrepro.algorithms.<name>``: its client update and aggregation together) is
imported only when the algorithm itself is needed, by
:func:`pflrepro.algorithms.base.get_algorithm`. Registering the class
(:func:`~pflrepro.algorithms.base.register_algorithm`) checks that it matches its
entry here.

Hyperparameters are frozen dataclasses whose fields are declared with :func:`hyper`
(default, schema description, optional bounds/choices).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class NoHyper:
    """An algorithm without hyperparameters."""


def hyper(default: Any, doc: str, choices: tuple[Any, ...] | None = None,
          minimum: float | None = None, maximum: float | None = None) -> Any:
    """Declare a hyperparameter: default, schema description and optional bounds/choices."""
    meta: dict[str, Any] = {"doc": doc}
    if choices is not None:
        meta["choices"] = tuple(choices)
    if minimum is not None:
        meta["minimum"] = minimum
    if maximum is not None:
        meta["maximum"] = maximum
    return dataclasses.field(default=default, metadata=meta)


def _require_positive(owner: str, **values: float) -> None:
    for key, value in values.items():
        if not value > 0:
            raise ValueError(f"algorithm {owner!r}: hyperparameter {key!r} must be > 0, "
                             f"got {value!r}")


# apfl: pflrepro/algorithms/apfl.py
@dataclasses.dataclass(frozen=True)
class APFLHyper:
    """Hyperparameters of APFL."""

    alpha: float = hyper(0.5, "Initial mixing weight α_i of the personal model in "
                              "α v_i + (1 − α) w (the fixed α when not adaptive).",
                         minimum=0.0, maximum=1.0)
    adaptive_alpha: bool = hyper(True, "Learn each α_i by gradient steps (APFL's adaptive "
                                       "variant); false keeps α fixed.")
    alpha_lr: float = hyper(0.01, "Step size of the α_i updates (used only when "
                                  "adaptive_alpha is true).", minimum=0.0)


# clustered_fl: pflrepro/algorithms/clustered_fl.py
@dataclasses.dataclass(frozen=True)
class ClusteredFLHyper:
    """Hyperparameters of Clustered FL (defaults from FedEM's and the authors' code)."""

    eps1: float = hyper(0.4, "ε₁: split only when the norm of the cluster's mean update is "
                        "below this.", minimum=0.0)
    eps2: float = hyper(1.6, "ε₂: split only when some member's update norm exceeds this.",
                        minimum=0.0)
    warmup_rounds: int = hyper(20, "No split in rounds 1..warmup_rounds.", minimum=0)
    min_cluster_size: int = hyper(3, "Only clusters with at least this many members split.",
                                  minimum=2)


# fedamp: pflrepro/algorithms/fedamp.py
#: How FedAMP / HeurFedAMP clients start: one seeded model copied to every client (the
#: reference implementations), or a model of its own per client (our former default).
AMP_INITS = ("shared", "independent")


@dataclasses.dataclass(frozen=True)
class FedAMPHyper:
    """Hyperparameters of FedAMP (the paper gives no values; see fedamp.py for the defaults)."""

    lam: float = hyper(1e-7, "λ: weight of the attention-inducing penalty; the client's "
                       "proximal pull towards u_i has coefficient λ/α (default 1; 0: none).",
                       minimum=0.0)
    sigma: float = hyper(1e-5, "σ (> 0) of A(x) = 1 − exp(−x/σ), on the scale of x, the "
                         "squared model distance that `distance` names (per parameter by "
                         "default, so σ does not change with the model's size); σ ≪ x means "
                         "no messages, σ ≫ x equal weights for every peer.", minimum=0.0)
    alpha: float = hyper(1e-7, "α_k (> 0, constant): server step; ξ_ij = α·exp(−x_ij/σ)/σ. "
                         "α ≤ σ/(K − 1) keeps ξ_ii ≥ 0 at any distances (default α/σ = 0.01: "
                         "up to 101 clients); a negative ξ_ii raises.", minimum=0.0)
    distance: str = hyper("mean", "x_ij: 'mean' = ‖w_i − w_j‖²/P (mean squared distance per "
                          "parameter, P parameters; eq. 5 with λ, σ, α all multiplied by P), "
                          "'sum' = ‖w_i − w_j‖² as printed in the paper (σ then depends on "
                          "the model's size).", choices=("mean", "sum"))
    init: str = hyper("shared", "'shared': every client starts from one seeded model (as the "
                      "reference implementations); 'independent': each client draws its own.",
                      choices=AMP_INITS)

    def __post_init__(self) -> None:
        _require_positive("fedamp", sigma=self.sigma, alpha=self.alpha)


# fedavg_plus: pflrepro/algorithms/fedavg_plus.py
@dataclasses.dataclass(frozen=True)
class FedAvgPlusHyper:
    """Hyperparameters of FedAvg+."""

    finetune_epochs: int = hyper(1, "Local epochs of tuning before each client's evaluation.",
                                 minimum=1)


# fedem: pflrepro/algorithms/fedem.py
@dataclasses.dataclass(frozen=True)
class FedEMHyper:
    """Hyperparameters of FedEM."""

    components: int = hyper(4, "M: number of shared component models (FedeRiCo's "
                               "comparison uses 4).", minimum=1)

    def __post_init__(self) -> None:
        if isinstance(self.components, bool) or not isinstance(self.components, int):
            raise ValueError(f"fedem: components must be an int, got {self.components!r}")
        if self.components < 1:
            raise ValueError(f"fedem: components must be >= 1, got {self.components}")


# federico: pflrepro/algorithms/federico.py
@dataclasses.dataclass(frozen=True)
class FedeRiCoHyper:
    """Hyperparameters of FedeRiCo (defaults from the paper)."""

    neighbors: int = hyper(3, "M: neighbours each client samples per round.", minimum=0)
    epsilon: float = hyper(0.3, "ε of ε-greedy sampling (1 = uniform).", minimum=0.0,
                           maximum=1.0)
    beta: float = hyper(0.6, "β: momentum of the EMA loss tracking.", minimum=0.0, maximum=1.0)
    loss_tracking: str = hyper("ema", "'ema' (paper default) or 'accumulative' (Fig. 5a).",
                               choices=("ema", "accumulative"))
    estep_loss: str = hyper("sum", "ℓ_ij of the E-step: 'sum' of the cross-entropy over client "
                            "i's training samples (eq. 3, the paper's form) or the per-sample "
                            "'mean' (our former default; much flatter weights).",
                            choices=("sum", "mean"))
    mstep: str = hyper("step", "M-step per round: 'step' = one optimiser step on eq. 4's "
                       "(1/n) Σ_i w_ik Σ_{s∈D_i} ℓ (the paper's 'small gradient steps'), from "
                       "one mini-batch of every client that used model k; 'epoch' = the "
                       "owner's local epoch of such steps, each client's batch mean weighted "
                       "by w_ik (our former default).", choices=("step", "epoch"))


# fedfomo: pflrepro/algorithms/fedfomo.py
@dataclasses.dataclass(frozen=True)
class FedFomoHyper:
    """Hyperparameters of FedFomo (defaults: FedeRiCo's comparison and the official code)."""

    val_fraction: float = hyper(0.2, "Fraction of each client's training data held out to "
                                "score downloaded models (0 < f < 1).", minimum=0.0, maximum=1.0)
    downloads: int = hyper(-1, "Models each client downloads per round (-1: all K-1 others).",
                           minimum=-1)
    epsilon: float = hyper(0.3, "ε of the ε-greedy download choice (used when downloads < K-1).",
                           minimum=0.0, maximum=1.0)
    epsilon_decay: float = hyper(0.05, "ε decreases by this much every round (official code).",
                                 minimum=0.0)
    affinity: str = hyper("clipped", "Affinity update: 'clipped' adds the normalised weights, "
                          "'signed' the unclipped scores / |their sum| (official code).",
                          choices=("clipped", "signed"))
    reference: str = hyper("previous", "Model φ_i the candidates are scored against and the "
                           "update starts from: 'previous' = the client's model before its "
                           "last local training, its trained model being a candidate too "
                           "(official code, baseline 'first_model'); 'current' = its trained "
                           "model, downloads only (our former choice: a positive download "
                           "discards the client's last training).",
                           choices=("previous", "current"))
    distance: str = hyper("l1", "Parameter distance dividing the loss gains: 'l1' = Σ|θ_c − φ_i| "
                          "(official default); 'l2' = Euclidean norm (our former choice).",
                          choices=("l1", "l2"))
    init: str = hyper("shared", "'shared': every client starts from one seeded model (official "
                      "code); 'independent': each client draws its own (our former choice).",
                      choices=("shared", "independent"))

    def __post_init__(self) -> None:
        if not 0.0 < self.val_fraction < 1.0:
            raise ValueError(f"algorithm 'fedfomo': val_fraction must lie strictly between "
                             f"0 and 1, got {self.val_fraction}")
        if self.downloads == 0:
            raise ValueError("algorithm 'fedfomo': downloads must be >= 1 or -1 (all others)")


# fedprox: pflrepro/algorithms/fedprox.py
@dataclasses.dataclass(frozen=True)
class FedProxHyper:
    """Hyperparameters of FedProx."""

    mu: float = hyper(0.01, "μ: weight of the proximal term (μ/2)‖w − w_global‖² in each "
                            "client's local objective (0 = FedAvg).", minimum=0.0)


# fedprox_ft: pflrepro/algorithms/fedprox_ft.py
@dataclasses.dataclass(frozen=True)
class FedProxFTHyper:
    """Hyperparameters of FedProx-FT."""

    mu: float = hyper(0.01, "μ: weight of the proximal term (μ/2)‖w − w_global‖² in each "
                            "client's local objective during training (0 = FedAvg-FT).",
                      minimum=0.0)
    finetune_epochs: int = hyper(1, "Local epochs of fine-tuning of the global model before "
                                    "each client's evaluation.", minimum=1)


# heurfedamp: pflrepro/algorithms/heurfedamp.py
@dataclasses.dataclass(frozen=True)
class HeurFedAMPHyper:
    """Hyperparameters of HeurFedAMP (the paper gives no values; defaults fit digits)."""

    lam: float = hyper(1.0, "λ: the client's proximal pull towards u_i has coefficient λ/α "
                       "(0: none).", minimum=0.0)
    alpha: float = hyper(1.0, "α_k (> 0, constant): only sets the proximal coefficient λ/α "
                         "(the weights ξ do not depend on it).", minimum=0.0)
    sigma: float = hyper(50.0, "σ (> 0): scale of the cosine similarities in the softmax over "
                         "the other clients.", minimum=0.0)
    self_attention: float = hyper(0.5, "ξ_ii: weight of a client's own model in its cloud model; "
                                  "the others share 1 − ξ_ii.", minimum=0.0, maximum=1.0)
    init: str = hyper("shared", "'shared': every client starts from one seeded model (as the "
                      "reference implementations); 'independent': each client draws its own.",
                      choices=AMP_INITS)

    def __post_init__(self) -> None:
        _require_positive("heurfedamp", sigma=self.sigma, alpha=self.alpha)


# scaffold: pflrepro/algorithms/scaffold.py
@dataclasses.dataclass(frozen=True)
class ScaffoldHyper:
    """Hyperparameters of SCAFFOLD."""

    server_lr: float = hyper(1.0, "η_g: global step size, x ← x + η_g · mean_i(y_i − x) "
                                  "(1 = the plain average of the local models).", minimum=0.0)


@dataclasses.dataclass(frozen=True)
class AlgorithmInfo:
    """An algorithm as the config sees it; its class lives in module ``module``."""

    name: str
    summary: str
    Hyper: type = NoHyper
    module: str = ""
    #: The algorithm presumes plain SGD (``training.optimizer: sgd``, ``momentum: 0``);
    #: the config check rejects any other optimiser at parse time.
    requires_plain_sgd: bool = False

    def __post_init__(self) -> None:
        if not dataclasses.is_dataclass(self.Hyper):
            raise TypeError(f"algorithm {self.name!r}: Hyper must be a dataclass")
        if not self.module:
            object.__setattr__(self, "module", f"pflrepro.algorithms.{self.name}")


def _infos(*infos: AlgorithmInfo) -> dict[str, AlgorithmInfo]:
    out: dict[str, AlgorithmInfo] = {}
    for info in infos:
        if info.name in out:
            raise ValueError(f"algorithm {info.name!r} declared twice")
        out[info.name] = info
    return out


#: Every algorithm by registry name (``algorithm:`` in the config).
INFOS: Mapping[str, AlgorithmInfo] = _infos(
    AlgorithmInfo("apfl", "APFL (Deng et al. 2020): personal model mixed with the global one "
                  "by α_i.", APFLHyper),
    AlgorithmInfo("clustered_fl", "Clustered FL (Sattler et al. 2020): recursive "
                  "bipartitioning by update cosine.", ClusteredFLHyper),
    AlgorithmInfo("fedamp", "FedAMP (Huang et al. 2021): per-client cloud models mixed by "
                  "attention exp(−‖w_i − w_j‖²/σ), proximal local training.", FedAMPHyper),
    AlgorithmInfo("fedavg", "FedAvg (McMahan et al. 2017): one global model, size-weighted "
                  "averaging."),
    AlgorithmInfo("fedavg_plus", "FedAvg+ (FedAvg with local tuning before evaluation, Jiang "
                  "et al. 2019).", FedAvgPlusHyper),
    AlgorithmInfo("fedem", "FedEM (Marfoq et al. 2021): federated EM over M shared component "
                  "models.", FedEMHyper),
    AlgorithmInfo("federico", "FedeRiCo (Zhong et al. 2022): decentralised EM over client "
                  "models.", FedeRiCoHyper),
    AlgorithmInfo("fedfomo", "FedFomo (Zhang et al. 2021): clients mix in models that lower "
                  "their val loss.", FedFomoHyper),
    AlgorithmInfo("fedprox", "FedProx (Li et al. 2020): FedAvg with a proximal term "
                  "μ/2‖w − w_global‖².", FedProxHyper),
    AlgorithmInfo("fedprox_ft", "FedProx-FT (FedProx, then local fine-tuning before "
                  "evaluation; Wang et al. 2019).", FedProxFTHyper),
    AlgorithmInfo("heurfedamp", "HeurFedAMP (Huang et al. 2021): FedAMP with a fixed "
                  "self-attention and a softmax of scaled cosine similarities over the other "
                  "clients.", HeurFedAMPHyper),
    AlgorithmInfo("local", "Local training only, no collaboration (FedeRiCo 'Local', FedAMP "
                  "'Separate')."),
    AlgorithmInfo("scaffold", "SCAFFOLD (Karimireddy et al. 2020): control variates against "
                  "client drift.", ScaffoldHyper, requires_plain_sgd=True),
)


def algorithm_info(name: str) -> AlgorithmInfo:
    """The declared algorithm ``name`` (a clear error for unknown names)."""
    if name not in INFOS:
        raise ValueError(f"unknown algorithm {name!r}; known: {sorted(INFOS)}")
    return INFOS[name]


def parse_hyper(cls: Any, values: Mapping[str, Any]) -> Any:
    """Build ``cls.Hyper`` from a mapping; unknown keys and wrong types raise ValueError.

    ``cls`` is an algorithm class or its :class:`AlgorithmInfo` (anything with ``name``
    and ``Hyper``).
    """
    fields = {f.name: f for f in dataclasses.fields(cls.Hyper)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"algorithm {cls.name!r}: unknown hyperparameter(s) {unknown}; "
                         f"known: {sorted(fields)}")
    for key, value in values.items():
        expected = type(fields[key].default)
        ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            ok = True
        if not ok:
            raise ValueError(f"algorithm {cls.name!r}: hyperparameter {key!r} must be "
                             f"{expected.__name__}, got {value!r}")
        meta = fields[key].metadata
        if "choices" in meta and value not in meta["choices"]:
            raise ValueError(f"algorithm {cls.name!r}: hyperparameter {key!r} must be one of "
                             f"{list(meta['choices'])}, got {value!r}")
        if "minimum" in meta and value < meta["minimum"]:
            raise ValueError(f"algorithm {cls.name!r}: hyperparameter {key!r} must be >= "
                             f"{meta['minimum']}, got {value!r}")
        if "maximum" in meta and value > meta["maximum"]:
            raise ValueError(f"algorithm {cls.name!r}: hyperparameter {key!r} must be <= "
                             f"{meta['maximum']}, got {value!r}")
    coerced = {k: (float(v) if type(fields[k].default) is float else v) for k, v in values.items()}
    return cls.Hyper(**coerced)
