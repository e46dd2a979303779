"""The shell commands of README.md and docs/**/*.md, as a reader would copy them.

A command is a line of a fenced ``bash``/``sh``/``console``/``shell`` block (continuation
lines joined, a trailing ``# comment`` and a ``$`` prompt dropped), a line of an
unlabelled or indented code block that starts with a command word (the other lines of
such a block are output), or an inline code span of the prose whose first word, after ``VAR=value``
settings, is a command word or a script of the project. ``tests/unit/test_docs_commands.py``
checks each one; ``tests/workflow/test_docs_commands_plan.py`` plans the Snakemake ones.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: The pages whose commands are checked.
PAGES = (REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")))
#: First words that make a code span or an unlabelled block's line a command.
COMMAND_WORDS = frozenset({
    "pflrepro", "snakemake", "python", "python3", "pytest", "pip", "ruff", "bash", "sh",
    "cd", ".", "source", "sbatch", "squeue", "sacct", "scancel", "srun", "sinfo", "git",
    "ls", "du", "sha256sum", "tail", "head", "cat", "apt-get", "apt", "conda", "mamba",
    "nvidia-smi", "/usr/bin/time", "nice", "env", "export",
})
#: Labels of fenced blocks whose every line is a command.
SHELL_LABELS = frozenset({"bash", "sh", "console", "shell"})
_FENCE = re.compile(r"^(?P<indent> *)```(?P<label>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```",
                    re.M | re.S)
#: An indented code block: lines of 4+ spaces after a blank line (not inside a list).
_INDENTED = re.compile(r"(?:^|\n)\n(?P<body>(?: {4}[^\n]*\n)+)")
_SETTING = re.compile(r"[A-Z_][A-Z0-9_]*=\S*")
#: A path of the project that is a script (first word of a command).
_SCRIPT = re.compile(r"(?:\./)?(?:benchmarks|tests|\.ci|workflow)/[\w./-]*")


@dataclass(frozen=True)
class Command:
    """One command of one page, as written (continuations joined, comment dropped)."""

    page: str
    line: int
    text: str
    inline: bool

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def first_word(text: str) -> str:
    """The command word of ``text``: its first word after ``VAR=value`` settings."""
    words = text.split()
    while words and _SETTING.fullmatch(words[0]):
        words = words[1:]
    return words[0] if words else ""


def is_command(text: str) -> bool:
    """Whether a code span or an unlabelled block's line reads as a shell command.

    A project script counts when it is given arguments or is executable; a script named
    alone (`benchmarks/fedmix_gates.py`, a test file) is a file the prose names.
    """
    word = first_word(text)
    if word in COMMAND_WORDS:
        return True
    path = REPO / word
    return bool(_SCRIPT.fullmatch(word) and path.is_file() and
                (len(text.split()) > 1 or os.access(path, os.X_OK)))


def _block_commands(page: str, start: int, body: str, shell: bool) -> list[Command]:
    commands = []
    lines = body.split("\n")
    i = 0
    while i < len(lines):
        first = i
        text = lines[i]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + " " + lines[i].strip()
        i += 1
        text = re.sub(r"^\s*\$ ", "", text)
        text = re.sub(r"\s+#.*$", "", text).strip()
        if text and not text.startswith("#") and (shell or is_command(text)):
            commands.append(Command(page, start + first, text, inline=False))
    return commands


def page_commands(path: Path) -> list[Command]:
    """The commands of one page, in page order."""
    page = str(path.relative_to(REPO))
    text = path.read_text()
    commands: list[Command] = []
    prose = list(text)
    for block in _FENCE.finditer(text):
        start = text.count("\n", 0, block.start("body")) + 1
        label = block.group("label")
        if label in SHELL_LABELS or not label:
            commands += _block_commands(page, start, block.group("body"),
                                        shell=label in SHELL_LABELS)
        prose[block.start():block.end()] = re.sub(r"[^\n]", " ", block.group(0))
    prose_text = "".join(prose)
    for block in _INDENTED.finditer(prose_text):  # Markdown's indented code blocks
        start = prose_text.count("\n", 0, block.start("body")) + 1
        body = re.sub(r"^    ", "", block.group("body"), flags=re.M)
        commands += _block_commands(page, start, body, shell=False)
        prose_text = (prose_text[:block.start("body")] +
                      re.sub(r"[^\n]", " ", block.group("body")) +
                      prose_text[block.end("body"):])
    for span in re.finditer(r"(?<!`)`([^`]+)`(?!`)", prose_text):
        code = span.group(1)
        if "\n\n" in code:
            continue
        code = " ".join(code.split())
        if is_command(code):
            line = prose_text.count("\n", 0, span.start()) + 1
            commands.append(Command(page, line, code, inline=True))
    return sorted(commands, key=lambda c: c.line)


def all_commands() -> list[Command]:
    """Every page's commands."""
    return [command for page in PAGES for command in page_commands(page)]


def simple_commands(text: str) -> list[list[str]]:
    """``text``'s simple commands as the shell splits them (at ``&&``, ``||``, ``;``,
    ``|``), each a list of words, redirections (``> FILE``, ``>&-``) dropped."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    commands: list[list[str]] = [[]]
    tokens = list(lexer)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in ("&&", "||", ";", "|"):
            commands.append([])
        elif set(token) <= set("<>&") and ">" in token:  # a redirection and its target
            i += 1
        else:
            commands[-1].append(token)
        i += 1
    return [command for command in commands if command]


def brace_expand(word: str) -> list[str]:
    """``word`` with its ``{a,b}`` groups expanded as bash does (left to right)."""
    match = re.search(r"\{([^{}]*,[^{}]*)\}", word)
    if not match:
        return [word]
    head, tail = word[:match.start()], word[match.end():]
    return [expanded for choice in match.group(1).split(",")
            for expanded in brace_expand(head + choice + tail)]


#: Placeholders of the docs' commands and what a check puts for them (whole words).
PLACEHOLDERS = {"N": "2", "M": "2", "T": "1", "C": "10", "FILE": "config.yaml",
                "DIR": "results", "SRC": "src", "SECONDS": "5",
                "FILE=SHA256": "x.zip=" + "0" * 64}
#: A ``<...>`` placeholder (``<this src>``, ``<jobid>``) becomes this word.
DESCRIBED = "PLACEHOLDER"
#: Commands the docs show that cannot run here, and why (the project's scripts among
#: them are checked to exist).
NOT_RUN = {
    "pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu":
        "needs PyTorch's package index (these machines reach PyPI only)",
    "pip install snakemake-executor-plugin-slurm==2.8.0":
        "a package index; the pin is pyproject.toml's (checked below)",
    "sbatch --parsable --job-name <run id> --output "
    ".snakemake/slurm_logs/group_train_train/%j.log":
        "the submission the SLURM plugin makes (output, not typed); tests/slurm runs it",
    "sbatch": "SLURM: tests/slurm/test_slurm.py submits to a real cluster",
    "squeue --me": "SLURM: needs a running cluster (tests/slurm)",
    "sacct -j <jobid>": "SLURM accounting: needs a cluster with a database",
    "sacct --completion": "SLURM: tests/slurm/test_slurm.py reads it on its cluster",
    "sacct --completion -P -n --format JobID,JobName,Partition,Account,State":
        "SLURM: tests/slurm/test_slurm.py reads it on its cluster",
    "tests/slurm/cluster.sh start|stop": "root and slurm-wlm: tests/slurm/test_slurm.py",
    "benchmarks/gpu_check.sh": "a GPU: run on a lent GPU machine (benchmarks/README.md)",
}
#: Code spans that start like a command but are none, and what they are.
NOT_COMMANDS = {
    "pflrepro CMD: error: …": "the format of an error line",
    "snakemake --configfile deep.yaml": "a bad input (a config nested 5,000 levels) "
                                        "whose Snakemake traceback the page documents",
}


def doc_files() -> dict[str, str]:
    """Files the docs' commands name that a reader writes from a page (name -> text)."""
    page = (REPO / "docs/your-experiment.md").read_text()
    (my,) = re.findall(r"```yaml\n(# my\.yaml.*?)```", page, flags=re.S)
    return {"my.yaml": my}


def _substitute(text: str) -> str:
    text = re.sub(r"<[^<>]*>", DESCRIBED, text)
    text = re.sub(r"(\s-[-\w]+) (?:\.\.\.|…)", rf"\1 {DESCRIBED}", text)  # --out ...
    text = re.sub(r"\s*(?:\.\.\.|…)\s*$", "", text)  # `pflrepro --require-source SRC ...`
    return re.sub(r"\[(-[^\[\]]*|[A-Z]+)\]", r"\1", text)  # a synopsis' [--option X]


def _placeholder(word: str) -> str:
    key, eq, value = word.rpartition("=")
    return (f"{key}={PLACEHOLDERS[value]}" if eq and value in PLACEHOLDERS
            else PLACEHOLDERS.get(word, word))


def command_words(text: str) -> list[list[str]]:
    """``text``'s simple commands, placeholders put in (:data:`PLACEHOLDERS`)."""
    return [[_placeholder(w) for w in command]
            for command in simple_commands(_substitute(text))]
