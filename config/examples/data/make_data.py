"""Make the example's two files (config/examples/reviews.yaml): run from the repository root,

    python config/examples/data/make_data.py

* reviews.csv: 800 short product and film reviews with a string label (negative / positive) and an id,
  drawn by this project's own synthetic generator (affine_homotopy.models.synthetic, seed 26): no
  third-party data.
* reviews_lsa.npz: representations of those reviews "computed elsewhere": latent semantic analysis
  (TF-IDF of words and word pairs, then the top 32 singular directions), with numpy only. One (N, D)
  array, 'lsa', stands for every configured layer; 'ids' ties its rows to the reviews by their id.

The files are committed with the example and pinned by config/examples/reviews.lock.yaml (their sha256):
rewriting them (another numpy may round the SVD differently) makes the lock refuse them until it is
updated with --config update_lock=True.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from affine_homotopy.models.synthetic import make_sentiment_task

HERE = Path(__file__).resolve().parent
N_REVIEWS, SEED, WIDTH = 800, 26, 32


def reviews() -> pd.DataFrame:
    train, dev = make_sentiment_task(seed=SEED, n_train=N_REVIEWS - 80, n_dev=80, label_noise=0.05)
    frame = pd.concat([train, dev], ignore_index=True)
    return pd.DataFrame({
        "id": [f"review-{k:03d}" for k in range(len(frame))],
        "text": frame["text_a"],
        "label": frame["label"].map({0: "negative", 1: "positive"}),
    })


def lsa(texts: list[str], width: int) -> np.ndarray:
    """TF-IDF (words and adjacent word pairs, sublinear counts, l2-normalised rows) -> top singular directions."""
    documents = []
    for text in texts:
        words = re.findall(r"[a-z']+", text.lower())
        documents.append(Counter(words + [f"{a} {b}" for a, b in zip(words, words[1:])]))
    vocabulary = sorted({term for document in documents for term in document})
    column = {term: k for k, term in enumerate(vocabulary)}
    counts = np.zeros((len(texts), len(vocabulary)))
    for row, document in enumerate(documents):
        for term, count in document.items():
            counts[row, column[term]] = 1 + np.log(count)
    idf = np.log((1 + len(texts)) / (1 + (counts > 0).sum(axis=0))) + 1
    weights = counts * idf
    weights /= np.linalg.norm(weights, axis=1, keepdims=True)
    u, s, _ = np.linalg.svd(weights, full_matrices=False)
    u *= np.sign(u[np.abs(u).argmax(axis=0), range(u.shape[1])])  # a fixed sign per direction
    return (u[:, :width] * s[:width]).astype(np.float32)


def main() -> None:
    table = reviews()
    table.to_csv(HERE / "reviews.csv", index=False)
    np.savez(HERE / "reviews_lsa.npz", ids=np.array(table["id"], dtype=str), lsa=lsa(table["text"].tolist(), WIDTH))
    print(f"wrote {HERE / 'reviews.csv'} ({len(table)} rows, {table['label'].value_counts().to_dict()}) and "
          f"{HERE / 'reviews_lsa.npz'} ({len(table)} x {WIDTH})")


if __name__ == "__main__":
    main()
