"""The data sets, one module each (``digits`` bundled, the others downloaded or placed).

Nothing here imports them: :data:`pflrepro.data.datasets.DATASETS` imports every module
of this package the first time it is read (a scan of this directory, as
:data:`pflrepro.data.partition.PARTITIONERS` finds the partition schemes), and each
module registers its :class:`~pflrepro.data.datasets.DatasetSource` with
:func:`~pflrepro.data.datasets.register_dataset`. A source's ``prepare(out_dir,
raw_dir, mirrors)`` fetches the raw files into ``raw_dir`` (the helpers in
:mod:`pflrepro.data.rawfiles`), reads the real file format (:mod:`pflrepro.data.formats`)
and writes the uniform form of :mod:`pflrepro.data.store`.

Official train and test parts are **pooled** into one array (train first, then
test, each in file order): partitions later make their own per-client train/test
splits, as FedeRiCo and FedEM do. Nothing about the official split is kept.

Every prepare function takes its file list as a keyword argument ``files`` whose
default is its module's manifest, so a test (or a user with a private copy) can pass
its own :class:`~pflrepro.data.download.RemoteFile` specs and mirrors without
touching module globals.

Checksums
---------
``sha256`` values are those of the files on the official hosts, published widely
and cross-checked against several independent public sources (listed beside each
entry); the publishers themselves list only MD5 sums, quoted in comments.
``content_sha256`` (the SHA-256 of the gunzipped content) lets re-compressed
mirrors such as Debian's ``dataset-fashion-mnist`` package verify. FEMNIST and
Office-Home have no official checksum: they are trusted on first use (the hash of
the first file placed is recorded in ``raw_dir/<name>.sha256`` and enforced after),
once the archive has been read to its end; when a later archive differs, the error
names that record, to be deleted if the first archive was the wrong one.

Extra arrays
------------
``femnist`` writes ``writer.npy`` (``int64``, index of each image's writer, i.e. its
natural client) and ``writers.json`` (writer ids in index order); ``officehome``
writes ``domain.npy`` (``int64``, index into
:data:`pflrepro.data.sources.officehome.OFFICEHOME_DOMAINS`) and ``classes.json``. They are
written before ``meta.json``, beside ``x.npy``.
"""
