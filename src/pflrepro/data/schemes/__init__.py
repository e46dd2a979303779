"""Partition schemes, one module each.

Nothing here imports them: :data:`pflrepro.data.partition.PARTITIONERS` imports every
module of this package the first time it is read (a scan of this directory), and a
partition job's code digest covers only its own scheme's module.
"""
