"""The stored artefacts: atomic files under digests, the run table, checkpoints, progress.

The bottom layer with :mod:`pflrepro.seeding`: every other layer writes and reads its
files through it, and it imports nothing of the package but those two (the version in
:mod:`pflrepro`).
"""
