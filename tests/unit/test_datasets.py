"""Real-dataset readers and the fetcher, against generated files of the published formats
served by a local HTTP server on 127.0.0.1 (no network needed)."""

from __future__ import annotations

import hashlib
import http.server
import threading
from functools import partial

import numpy as np
import pytest

from bsdemo import datasets
from bsdemo.config import ConfigError, RunConfig
from tests.timeouts import scaled

RNG = np.random.RandomState(0)


def mnist_like(n_train=120, n_test=30):
    return (
        RNG.randint(0, 256, (n_train, 28, 28)).astype(np.uint8),
        RNG.randint(0, 10, n_train),
        RNG.randint(0, 256, (n_test, 28, 28)).astype(np.uint8),
        RNG.randint(0, 10, n_test),
    )


@pytest.fixture
def mirror(tmp_path):
    """A local HTTP server over a folder; yields (folder, base URL)."""
    root = tmp_path / "mirror"
    root.mkdir()
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def publish_mnist(root, arrays):
    xtr, ytr, xte, yte = arrays
    blobs = {
        "train-images-idx3-ubyte.gz": datasets.write_idx_gz(xtr),
        "train-labels-idx1-ubyte.gz": datasets.write_idx_gz(ytr.astype(np.uint8)),
        "t10k-images-idx3-ubyte.gz": datasets.write_idx_gz(xte),
        "t10k-labels-idx1-ubyte.gz": datasets.write_idx_gz(yte.astype(np.uint8)),
    }
    for name, blob in blobs.items():
        (root / name).write_bytes(blob)
    return {name: hashlib.md5(blob).hexdigest() for name, blob in blobs.items()}


def test_idx_files_fetch_verify_and_read_back(mirror, tmp_path):
    root, url = mirror
    arrays = mnist_like()
    sums = publish_mnist(root, arrays)
    folder = datasets.fetch("mnist", tmp_path / "cache", base_url=url, checksums=sums)
    assert sorted(p.name for p in folder.iterdir()) == sorted(sums)
    x_train, y_train, x_test, y_test = datasets.load("mnist", tmp_path / "cache", fetch_missing=False)
    assert x_train.shape == (120, 1, 28, 28) and x_test.shape == (30, 1, 28, 28)
    assert (x_train[:, 0] == arrays[0]).all() and (y_test == arrays[3]).all()
    # a second fetch finds verified files and downloads nothing
    for p in root.iterdir():
        p.unlink()
    datasets.fetch("mnist", tmp_path / "cache", base_url=url, checksums=sums)


def test_a_wrong_checksum_is_refused_and_not_kept(mirror, tmp_path):
    root, url = mirror
    sums = publish_mnist(root, mnist_like())
    sums["train-images-idx3-ubyte.gz"] = "0" * 32
    with pytest.raises(ConfigError, match="published checksums"):
        datasets.fetch("mnist", tmp_path / "cache", base_url=url, checksums=sums)
    assert not (tmp_path / "cache" / "mnist" / "train-images-idx3-ubyte.gz").exists()
    assert not list((tmp_path / "cache" / "mnist").glob("*.part"))


def test_offline_gives_a_clear_message(tmp_path):
    with pytest.raises(datasets.DatasetUnavailable, match="Offline\\? Put the published files"):
        datasets.fetch("fashion", tmp_path, base_url="http://127.0.0.1:9/", timeout=2)


def test_cifar_binary_archive_reads_without_pickle(mirror, tmp_path):
    root, url = mirror
    x_train = RNG.randint(0, 256, (50, 3, 32, 32)).astype(np.uint8)
    y_train = RNG.randint(0, 10, 50)
    x_test, y_test = RNG.randint(0, 256, (10, 3, 32, 32)).astype(np.uint8), RNG.randint(0, 10, 10)
    blob = datasets.write_cifar_tar_gz(x_train, y_train, x_test, y_test)
    (root / "cifar-10-binary.tar.gz").write_bytes(blob)
    datasets.fetch(
        "cifar10", tmp_path, base_url=url, checksums={"cifar-10-binary.tar.gz": hashlib.md5(blob).hexdigest()}
    )
    xtr, ytr, xte, yte = datasets.load("cifar10", tmp_path, fetch_missing=False)
    assert xtr.shape == (50, 3, 32, 32) and (xtr == x_train).all() and (yte == y_test).all()


def test_truncated_idx_is_an_error(tmp_path):
    blob = datasets.write_idx_gz(np.zeros((4, 28, 28), np.uint8))
    import gzip

    raw = gzip.decompress(blob)[:-10]
    (tmp_path / "bad.gz").write_bytes(gzip.compress(raw))
    with pytest.raises(ValueError, match="bytes for dimensions"):
        datasets.read_idx(tmp_path / "bad.gz")


def test_the_engine_trains_on_a_cached_real_dataset(mirror, tmp_path, monkeypatch):
    root, url = mirror
    sums = publish_mnist(root, mnist_like(200, 50))
    monkeypatch.setenv("BSDEMO_DATA_DIR", str(tmp_path))
    datasets.fetch("mnist", base_url=url, checksums=sums)
    from bsdemo.engine import data
    from bsdemo.engine.train import train

    data._real_dataset.cache_clear()
    try:
        events = list(
            train(RunConfig(dataset="mnist", model="cnn", width=8, depth=2, batch_size=50, epochs=1))
        )
    finally:
        data._real_dataset.cache_clear()
    start, end = events[0], events[-1]
    assert start.train_samples == 200 and start.test_samples == 50
    assert end.status == "completed" and end.summary["steps"] == 4


def test_datasets_cli_lists_and_reports_offline_in_one_line(tmp_path):
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "bsdemo", "datasets", "list", "--cache", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert out.returncode == 0 and "mnist" in out.stdout and "not fetched" in out.stdout
    env = {"BSDEMO_DATASET_MIRROR": "http://127.0.0.1:9/", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-m", "bsdemo", "datasets", "fetch", "mnist", "--cache", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        env=env,
    )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "Offline?" in out.stderr and "Traceback" not in out.stderr


def test_the_bundled_digits_load_without_importing_scikit_learn():
    """A run's first step waits for its data: reading scikit-learn's digits file directly saves
    the ~1 s that importing scikit-learn costs, and gives exactly load_digits' images."""
    import subprocess
    import sys

    probe = (
        "import sys, torch\n"
        "from bsdemo.engine.data import load_dataset\n"
        "from bsdemo.config import RunConfig\n"
        "data = load_dataset(RunConfig(), torch.device('cpu'))\n"
        "assert 'sklearn' not in sys.modules, 'scikit-learn was imported'\n"
        "print(len(data.y_train) + len(data.y_test))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=scaled(120))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1797"]

    import torch
    from sklearn.datasets import load_digits

    from bsdemo.engine.data import _digits

    x, y = _digits()
    reference = load_digits()
    assert torch.equal(x, torch.tensor(reference.images, dtype=torch.float32).unsqueeze(1))
    assert torch.equal(y, torch.tensor(reference.target, dtype=torch.int64))
