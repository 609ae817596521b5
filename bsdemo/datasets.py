"""Real datasets — MNIST, Fashion-MNIST, CIFAR-10 — from their published files.

Our own readers for the published formats: IDX (MNIST, Fashion-MNIST) and CIFAR-10's *binary*
version (fixed-length records, so no pickle is ever loaded). Files are downloaded from their
canonical locations into a cache folder, each verified against its published MD5 before use.
Pure Python + numpy: `python -m bsdemo datasets fetch` needs no torch (the Docker build runs it).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import struct
import tarfile
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bsdemo.config import ConfigError

MNIST_FILES = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
FASHION_FILES = {
    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}
CIFAR_FILES = {"cifar-10-binary.tar.gz": "c32a1d4ab5d03f1284b67883e8d87530"}


@dataclass(frozen=True)
class Source:
    base_url: str  # where the published files live (BSDEMO_DATASET_MIRROR replaces it)
    files: dict[str, str]  # file name -> published MD5


SOURCES = {
    "mnist": Source("https://ossci-datasets.s3.amazonaws.com/mnist/", MNIST_FILES),
    "fashion": Source("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/", FASHION_FILES),
    "cifar10": Source("https://www.cs.toronto.edu/~kriz/", CIFAR_FILES),
}
CIFAR_MEMBERS = [f"cifar-10-batches-bin/data_batch_{i}.bin" for i in range(1, 6)]
CIFAR_TEST = "cifar-10-batches-bin/test_batch.bin"
CIFAR_RECORD = 1 + 3 * 32 * 32  # label byte + 3072 pixel bytes


class DatasetUnavailable(ConfigError):
    """A real dataset that is not in the cache and could not be fetched (offline, say)."""


def cache_dir() -> Path:
    """BSDEMO_DATASETS_DIR, else BSDEMO_DATA_DIR/datasets, else ~/.cache/bsdemo/datasets."""
    if os.environ.get("BSDEMO_DATASETS_DIR"):
        return Path(os.environ["BSDEMO_DATASETS_DIR"])
    root = os.environ.get("BSDEMO_DATA_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "bsdemo") / "datasets"


def md5(path: Path) -> str:
    digest = hashlib.md5()  # the published checksums are MD5
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(
    name: str,
    cache: Path | None = None,
    base_url: str | None = None,
    checksums: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Path:
    """Download `name`'s files into cache/name (skipping verified ones); returns that folder.

    Raises DatasetUnavailable with what to do when a file cannot be had, and ConfigError when a
    download does not match its published checksum (the bad file is not kept).
    """
    if name not in SOURCES:
        raise ConfigError("dataset", name, "one of " + ", ".join(SOURCES))
    source = SOURCES[name]
    folder = (cache or cache_dir()) / name
    folder.mkdir(parents=True, exist_ok=True)
    base = base_url or os.environ.get("BSDEMO_DATASET_MIRROR") or source.base_url
    expected = checksums or source.files
    for file, want in expected.items():
        target = folder / file
        if target.exists() and md5(target) == want:
            continue
        url = base.rstrip("/") + "/" + file
        with tempfile.NamedTemporaryFile(dir=folder, delete=False, suffix=".part") as tmp:
            try:
                with urllib.request.urlopen(url, timeout=timeout) as response:
                    shutil.copyfileobj(response, tmp)
            except (urllib.error.URLError, OSError) as exc:
                Path(tmp.name).unlink(missing_ok=True)
                raise DatasetUnavailable(
                    "dataset",
                    name,
                    f"a download that works: {url} failed ({exc}). Offline? "
                    f"Put the published files in {folder} and run again",
                ) from None
        got = md5(Path(tmp.name))
        if got != want:
            Path(tmp.name).unlink(missing_ok=True)
            raise ConfigError(
                "dataset",
                name,
                f"files matching their published checksums: {file} has MD5 {got}, expected {want}",
            )
        os.replace(tmp.name, target)
    return folder


def is_cached(name: str, cache: Path | None = None) -> bool:
    folder = (cache or cache_dir()) / name
    return all((folder / f).exists() for f in SOURCES[name].files)


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (gzipped): magic 0x0000 type ndim, big-endian int32 dims, then the data."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    zero, kind, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08:  # 0x08 = unsigned byte, the only type these sets use
        raise ValueError(f"{path.name}: not an unsigned-byte IDX file")
    dims = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    body = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path.name}: {body.size} bytes for dimensions {dims}")
    return body.reshape(dims)


def read_cifar_binary(path: Path) -> tuple[np.ndarray, ...]:
    """CIFAR-10's binary archive, read member by member from the tar (nothing extracted)."""

    def records(tar: tarfile.TarFile, member: str) -> tuple[np.ndarray, np.ndarray]:
        raw = np.frombuffer(tar.extractfile(member).read(), dtype=np.uint8)
        if raw.size % CIFAR_RECORD:
            raise ValueError(f"{member}: {raw.size} bytes is not whole records")
        rows = raw.reshape(-1, CIFAR_RECORD)
        return rows[:, 1:].reshape(-1, 3, 32, 32), rows[:, 0].copy()

    with tarfile.open(path, "r:gz") as tar:
        train = [records(tar, m) for m in CIFAR_MEMBERS]
        x_test, y_test = records(tar, CIFAR_TEST)
    return (np.concatenate([x for x, _ in train]), np.concatenate([y for _, y in train]), x_test, y_test)


def load(name: str, cache: Path | None = None, fetch_missing: bool = True):
    """(x_train, y_train, x_test, y_test) as uint8 arrays, images (N, C, H, W), labels (N,)."""
    if fetch_missing and not is_cached(name, cache):
        fetch(name, cache)
    folder = (cache or cache_dir()) / name
    if name == "cifar10":
        return read_cifar_binary(folder / "cifar-10-binary.tar.gz")
    x_train = read_idx(folder / "train-images-idx3-ubyte.gz")[:, None]
    y_train = read_idx(folder / "train-labels-idx1-ubyte.gz")
    x_test = read_idx(folder / "t10k-images-idx3-ubyte.gz")[:, None]
    y_test = read_idx(folder / "t10k-labels-idx1-ubyte.gz")
    return x_train, y_train, x_test, y_test


def write_idx_gz(array: np.ndarray) -> bytes:
    """The IDX encoding of a uint8 array, gzipped (tests and mirrors use it)."""
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return gzip.compress(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def write_cifar_tar_gz(x_train, y_train, x_test, y_test) -> bytes:
    """A CIFAR-10 binary archive of the given arrays (five train batches, one test)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        parts = np.array_split(np.arange(len(y_train)), 5)
        members = [(m, x_train[p], y_train[p]) for m, p in zip(CIFAR_MEMBERS, parts, strict=True)]
        for member, x, y in [*members, (CIFAR_TEST, x_test, y_test)]:
            rows = np.concatenate([y.astype(np.uint8)[:, None], x.reshape(len(y), -1)], axis=1)
            data = rows.astype(np.uint8).tobytes()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
