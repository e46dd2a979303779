"""pyproject.toml, environment.yml and the rules' conda env list the same packages.

No conda solver is reachable in the tests: this checks what can be checked without
one (the files parse, the package names and version bounds agree, Python >= 3.11,
the rules point at an env that installs the project from the right place).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
#: conda-forge names of packages whose PyPI name differs.
CONDA_TO_PYPI = {"pytorch": "torch"}
#: Conda-only entries: the interpreter and the installer.
NOT_PACKAGES = {"python", "pip"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _pypi_packages() -> dict[str, SpecifierSet]:
    """Runtime dependencies, the slurm extra and the build backend."""
    data = _pyproject()
    extras = data["project"]["optional-dependencies"]
    lines = (data["project"]["dependencies"] + extras["slurm"]
             + data["build-system"]["requires"])
    out: dict[str, SpecifierSet] = {}
    for line in lines:
        req = Requirement(line)
        out[req.name.lower()] = req.specifier
    return out


def _conda_packages(path: Path) -> tuple[dict[str, SpecifierSet], dict]:
    env = yaml.safe_load(path.read_text(encoding="utf-8"))
    out: dict[str, SpecifierSet] = {}
    for dep in env["dependencies"]:
        if not isinstance(dep, str):
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)\s*(.*)", dep.strip())
        assert m, dep
        name, spec = m.group(1).lower(), m.group(2).replace(" ", "")
        out[CONDA_TO_PYPI.get(name, name)] = SpecifierSet(spec)
    return out, env


def test_environment_files_match_pyproject() -> None:
    pypi = _pypi_packages()
    for path in (ROOT / "environment.yml", ROOT / "workflow/envs/pflrepro.yaml"):
        conda, env = _conda_packages(path)
        packages = {k: v for k, v in conda.items() if k not in NOT_PACKAGES}
        assert sorted(packages) == sorted(pypi), path
        for name, spec in pypi.items():
            assert packages[name] == spec, (path, name, packages[name], spec)
        assert env["channels"] == ["conda-forge", "bioconda"], path
        assert "pytorch" not in env["channels"]  # the retired pytorch channel


def test_python_is_at_least_3_11_everywhere() -> None:
    assert SpecifierSet(_pyproject()["project"]["requires-python"]) == SpecifierSet(">=3.11")
    for path in (ROOT / "environment.yml", ROOT / "workflow/envs/pflrepro.yaml"):
        conda, _ = _conda_packages(path)
        assert conda["python"] == SpecifierSet(">=3.11"), path


def test_user_env_installs_the_project_beside_it() -> None:
    _, env = _conda_packages(ROOT / "environment.yml")
    pip = [d for d in env["dependencies"] if isinstance(d, dict)]
    # conda resolves this against the env file's directory: the project root
    assert pip == [{"pip": ["-e ."]}]
    assert (ROOT / "environment.yml").parent.joinpath("pyproject.toml").exists()


def test_rule_env_installs_the_project_by_its_post_deploy_script() -> None:
    common = (ROOT / "workflow/rules/common.smk").read_text(encoding="utf-8")
    m = re.search(r'^ENV = "([^"]+)"', common, re.M)
    assert m, "common.smk sets ENV"
    env_path = (ROOT / "workflow/rules" / m.group(1)).resolve()
    assert env_path == (ROOT / "workflow/envs/pflrepro.yaml").resolve()
    _, env = _conda_packages(env_path)
    # a pip path here would resolve against Snakemake's copy in .snakemake/conda/
    assert not [d for d in env["dependencies"] if isinstance(d, dict)]
    # Snakemake runs <env>.post-deploy.sh (same stem) in the new environment
    script = env_path.with_name(env_path.stem + ".post-deploy.sh")
    text = script.read_text(encoding="utf-8")
    assert "pip install --no-deps --no-build-isolation -e ." in text
    assert text.startswith("#!")
