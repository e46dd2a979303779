"""Test-wide settings: unit tests use tiny models, where one torch thread is fastest."""

import torch

torch.set_num_threads(1)
