"""Training settings shared by every method of an experiment."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pflrepro.choices import require_choice

#: Field descriptions, reused by the config schema.
TRAINING_DOCS: dict[str, str] = {
    "rounds": "Number of communication rounds.",
    "batch_size": "Mini-batch size of every local step.",
    "local_epochs": "Local epochs per round: steps = local_epochs * ceil(n_train / batch_size).",
    "local_steps": "If > 0, a fixed number of local steps per round (overrides local_epochs).",
    "optimizer": "Client optimiser: 'adam' or 'sgd' (state kept per client across rounds).",
    "lr": "Learning rate of the client optimiser.",
    "momentum": "SGD momentum (ignored by Adam).",
    "eval_every": "Evaluate every this many rounds (the last round is always evaluated).",
    "eval_batch_size": "Batch size of no-grad evaluation passes.",
    "model": "Model name from the model registry ('mlp', 'cnn').",
    "model_options": "Keyword options of the model builder, e.g. {hidden: [64]} for mlp.",
    "device": "'auto' (CUDA when present, else CPU), 'cpu' or 'cuda'.",
    "client_training": "Path of every method's multi-client local training "
                       "(pflrepro.training.local_training): 'auto' (all clients in one "
                       "vmapped pass "
                       "on CUDA; on the CPU one client after another, on the job's threads), "
                       "'loop' or 'vmap'. The two agree to float32 rounding, not bit for bit; "
                       "the path that ran is the run column 'client_training'.",
    "client_chunk": "Clients per vmapped pass; bounds GPU memory. 0: all, or on CUDA as "
                    "many as fit the free GPU memory (estimated per client).",
    "client_fraction": "C: fraction of the clients that take part in each round (0 < C <= 1); "
                       "m = max(1, round(C * K)) clients drawn without replacement as "
                       "client_selection says, seeded by (seed, round). Only methods that "
                       "support client sampling accept C < 1 (the config check says which).",
    "client_selection": "How the round's m clients are drawn when client_fraction < 1 (always "
                        "without replacement within a round, seeded by (seed, round)): "
                        "'uniform' (every m-subset equally likely), 'data_size' (successive "
                        "draws with probability proportional to the training-set size n_k "
                        "among the clients not yet drawn: p_k = n_k / n) or 'shuffled' "
                        "(random reshuffling: each client once per pass over the K clients, "
                        "a fresh seeded order each pass, so every client has taken part by "
                        "round ceil(K / m) and its per-round chance is still m / K). "
                        "pflrepro.training.selection.",
    "eval_test": "Test rows each client's personalised prediction is scored on: 'own' (its "
                 "own test share of the partition, drawn from its own distribution) or "
                 "'global' (the union of every client's test rows, the same for every "
                 "client: the data set's held-out rows).",
    "architectures": "Model heterogeneity: a list of {model, model_options} from the "
                     "smallest to the largest model; each client gets one (drawn by "
                     "architecture_assignment, seeded, recorded per client as the metric "
                     "'architecture') and 'model'/'model_options' above are not used. "
                     "Empty (default): every client runs 'model'. Only methods that "
                     "support heterogeneous models accept two or more (the config check "
                     "says which).",
    "architecture_assignment": "How clients get their architecture: 'data_size' (PerFed-CKT "
                               "Fig. 2a: a larger model with probability growing with the "
                               "client's data size; client k climbs each of the A-1 steps "
                               "from the smallest model with probability n_k / max_j n_j, so "
                               "its expected rank is proportional to its data size) or "
                               "'uniform' (each architecture with probability 1/A).",
}

#: The ways clients get their architecture (``training.architecture_assignment``).
ASSIGNMENTS = ("data_size", "uniform")
#: The ways a round's clients are drawn (``training.client_selection``).
SELECTIONS = ("uniform", "data_size", "shuffled")
#: The test rows a client is scored on (``training.eval_test``).
EVAL_TESTS = ("own", "global")
#: Keys left out of :meth:`TrainingConfig.to_dict` at their default, so that the specs
#: (and digests) of runs that do not set them stay as before the keys existed.
OMITTED_AT_DEFAULT = {"client_selection": "uniform", "eval_test": "own"}


#: Integer settings that must be at least 1 (the schema's minimum says the same).
POSITIVE_FIELDS = ("rounds", "batch_size", "eval_every", "eval_batch_size")


@dataclass(frozen=True)
class TrainingConfig:
    """Validated training settings (see :data:`TRAINING_DOCS`)."""

    rounds: int
    batch_size: int = 32
    local_epochs: int = 1
    local_steps: int = 0
    optimizer: str = "adam"
    lr: float = 0.01
    momentum: float = 0.0
    eval_every: int = 1
    eval_batch_size: int = 1024
    model: str = "cnn"
    model_options: Mapping[str, Any] = field(default_factory=dict)
    device: str = "auto"
    client_training: str = "auto"
    client_chunk: int = 0
    client_fraction: float = 1.0
    client_selection: str = "uniform"
    eval_test: str = "own"
    architectures: tuple[Mapping[str, Any], ...] = ()
    architecture_assignment: str = "data_size"

    def __post_init__(self) -> None:
        for name in POSITIVE_FIELDS:
            if getattr(self, name) < 1:
                raise ValueError(f"training.{name} must be >= 1, got {getattr(self, name)}")
        if self.local_epochs < 1 and self.local_steps < 1:
            raise ValueError("training: one of local_epochs or local_steps must be >= 1")
        if self.lr <= 0 or self.momentum < 0:
            raise ValueError(f"training: lr must be > 0 and momentum >= 0, got lr={self.lr}, "
                             f"momentum={self.momentum}")
        require_choice(self.device, ("auto", "cpu", "cuda"), "training.device")
        require_choice(self.client_training, ("auto", "loop", "vmap"), "training.client_training")
        if self.client_chunk < 0:
            raise ValueError(f"training.client_chunk must be >= 0, got {self.client_chunk}")
        if not 0.0 < self.client_fraction <= 1.0:
            raise ValueError(f"training.client_fraction must lie in (0, 1], got "
                             f"{self.client_fraction}")
        require_choice(self.client_selection, SELECTIONS, "training.client_selection")
        require_choice(self.eval_test, EVAL_TESTS, "training.eval_test")
        require_choice(self.architecture_assignment, ASSIGNMENTS,
                       "training.architecture_assignment")
        if not isinstance(self.architectures, list | tuple):
            raise ValueError(f"training.architectures must be a list of {{model, "
                             f"model_options}}, got {self.architectures!r}")
        archs = []
        for i, arch in enumerate(self.architectures):
            if not isinstance(arch, Mapping) or "model" not in arch or (
                    set(arch) - {"model", "model_options"}):
                raise ValueError(f"training.architectures[{i}] must be a mapping with 'model' "
                                 f"and optionally 'model_options', got {arch!r}")
            archs.append({"model": str(arch["model"]),
                          "model_options": dict(arch.get("model_options") or {})})
        object.__setattr__(self, "architectures", tuple(archs))

    @property
    def models(self) -> tuple[tuple[str, Mapping[str, Any]], ...]:
        """The run's architectures as (model, model_options), smallest first.

        ``architectures`` when given, else the one ``(model, model_options)``.
        """
        if self.architectures:
            return tuple((a["model"], a["model_options"]) for a in self.architectures)
        return ((self.model, self.model_options),)

    @property
    def heterogeneous(self) -> bool:
        """Whether clients may run different architectures (two or more listed)."""
        return len(self.architectures) > 1

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> TrainingConfig:
        """Build from a config mapping; unknown keys raise ValueError naming them."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"training: unknown key(s) {unknown}; known: {sorted(names)}")
        return cls(**dict(values))

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form (JSON-serialisable)."""
        out = dataclasses.asdict(self)
        out["model_options"] = dict(self.model_options)
        if self.architectures:
            out["architectures"] = [{"model": a["model"],
                                     "model_options": dict(a["model_options"])}
                                    for a in self.architectures]
        else:  # homogeneous: the spec (and its digest) as before these keys existed
            del out["architectures"], out["architecture_assignment"]
        for key, default in OMITTED_AT_DEFAULT.items():
            if out[key] == default:
                del out[key]
        return out
