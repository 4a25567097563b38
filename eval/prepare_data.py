#!/usr/bin/env python3
"""The evaluation's text and tokenizer: English technical prose from two Debian 12 packages,
`linux-doc-6.1` (the Linux kernel's Documentation/, reStructuredText and plain text) and
`perl-doc` (Perl's manual, POD), and a byte-level BPE tokenizer trained on the training part.
Whole directories of the kernel's documentation are kept out of training: the held-out ones give
the perplexity documents, another the validation text that decides when training stops.

    python3 eval/prepare_data.py            # downloads the packages with apt-get, writes eval/data/

Writes (eval/data/ is not committed: this script makes it again):
  train.u16        the training text's tokens, uint16
  heldout.json     the held-out directories' tokens, one list per directory
  validation.u16   the validation directory's tokens
  source.txt       the packages, versions and file counts the text came from
and eval/tokenizer.json when it does not exist (committed: the weights index its vocabulary).
"""
from __future__ import annotations

import argparse
import gzip
import json
import pathlib
import subprocess
import tempfile

import numpy as np

KERNEL_DOCS = ("linux-doc-6.1", "usr/share/doc/linux-doc-6.1/Documentation")
PERL_DOCS = ("perl-doc", "usr/share/perl")
# Whole directories the model never trains on; the perplexity documents are cut from them.
HELD_OUT = ("RCU", "locking", "mm", "scheduler")
VALIDATION = "process"
# Not English prose: other languages, and the ABI and device-tree listings (mostly key/value tables).
EXCLUDED = ("translations", "ABI", "devicetree")
VOCABULARY = 8192
HERE = pathlib.Path(__file__).resolve().parent


def extract_package(workdir: pathlib.Path, package: str, folder: str) -> tuple[pathlib.Path, str]:
    """apt-get download + dpkg -x: the package's folder under workdir, and its version."""
    subprocess.run(["apt-get", "download", package], cwd=workdir, check=True, capture_output=True)
    deb = next(workdir.glob(f"{package}_*.deb"))
    version = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True, capture_output=True,
                             text=True).stdout.strip()
    subprocess.run(["dpkg-deb", "-x", str(deb), str(workdir / package)], check=True)
    return workdir / package / folder, version


def read_pods(root: pathlib.Path) -> list[str]:
    return [path.read_text("utf-8", "replace") for path in sorted(root.rglob("*.pod"))]


def read_kernel_docs(docs: pathlib.Path) -> dict[str, list[str]]:
    """The .rst and .txt files' text, grouped by top-level directory, in path order. Only the
    files the package ships gzipped (Debian compresses those over 4 KiB) are read: the small ones,
    mostly index pages and stubs, are left out (the committed weights were trained so)."""
    groups: dict[str, list[str]] = {}
    for path in sorted(docs.rglob("*")):
        if not path.name.endswith((".rst.gz", ".txt.gz")) or len(path.relative_to(docs).parts) < 2:
            continue
        top = path.relative_to(docs).parts[0]
        if top in EXCLUDED:
            continue
        groups.setdefault(top, []).append(gzip.decompress(path.read_bytes()).decode("utf-8", "replace"))
    return groups


def train_tokenizer(texts: list[str], path: pathlib.Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCABULARY, special_tokens=["<|doc|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.save(str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=HERE / "data")
    args = parser.parse_args()
    from tokenizers import Tokenizer
    with tempfile.TemporaryDirectory() as tmp:
        docs, kernel_version = extract_package(pathlib.Path(tmp), *KERNEL_DOCS)
        groups = read_kernel_docs(docs)
        pods, perl_version = extract_package(pathlib.Path(tmp), *PERL_DOCS)
        perl = read_pods(pods)
    kept_out = HELD_OUT + (VALIDATION,)
    train = [text for top, texts in groups.items() if top not in kept_out for text in texts] + perl
    tokenizer_path = HERE / "tokenizer.json"
    if not tokenizer_path.exists():
        train_tokenizer(train, tokenizer_path)
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    separator = tokenizer.token_to_id("<|doc|>")

    def tokens(texts: list[str]) -> list[int]:
        ids: list[int] = []
        for encoding in tokenizer.encode_batch(texts):
            ids += [separator] + encoding.ids
        return ids

    args.out.mkdir(parents=True, exist_ok=True)
    train_ids = np.array(tokens(train), dtype=np.uint16)
    train_ids.tofile(args.out / "train.u16")
    heldout = {top: tokens(groups[top]) for top in HELD_OUT}
    (args.out / "heldout.json").write_text(json.dumps(heldout))
    validation = np.array(tokens(groups[VALIDATION]), dtype=np.uint16)
    validation.tofile(args.out / "validation.u16")
    files = sum(len(texts) for texts in groups.values())
    summary = (f"{KERNEL_DOCS[0]} {kernel_version} (Debian 12): {files} files of Documentation/ (.rst, .txt), "
               f"without {', '.join(EXCLUDED)}; {PERL_DOCS[0]} {perl_version}: {len(perl)} .pod files; "
               f"training: {len(train_ids)} tokens; validation: {VALIDATION}/ {len(validation)} tokens; held out: "
               + ", ".join(f"{top}/ {len(ids)}" for top, ids in heldout.items()) + " tokens\n")
    (args.out / "source.txt").write_text(summary)
    print(summary, end="")


if __name__ == "__main__":
    main()
