"""``python -m pflrepro``: the command-line interface."""

from pflrepro.cli import main

raise SystemExit(main())
