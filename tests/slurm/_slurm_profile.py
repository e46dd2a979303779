"""A copy of profiles/slurm with its partition and account lines filled in, as a user would.

The profile ships those two lines commented out under ``set-resources: train:``; a user
uncomments them and fills in the values (keeping the inner quotes). The SLURM tier and
the unit test of the profile's reach (tests/unit/test_cluster_settings.py) both start
from such a copy.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"


def user_profile(dest: Path, partition: str, account: str) -> Path:
    """Write the filled-in copy to ``dest/config.yaml``; returns ``dest``."""
    text = PROFILE.read_text()
    for key, value in (("slurm_partition", partition), ("slurm_account", account)):
        text, n = re.subn(rf"(?m)^(\s*)#\s*{key}:\s*(\"[^\"]*\"|\S+)",
                          lambda m, k=key, v=value: f"{m.group(1)}{k}: \"'{v}'\"", text)
        assert n == 1, f"profiles/slurm/config.yaml has no commented `{key}:` line"
    train = yaml.safe_load(text)["set-resources"]["train"]
    assert (train["slurm_partition"], train["slurm_account"]) == (f"'{partition}'",
                                                                  f"'{account}'"), train
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.yaml").write_text(text)
    return dest
