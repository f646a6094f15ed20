"""A two-layer perceptron in numpy (float32): inputs -> tanh hidden layer -> softmax classes.

The parameters live in one flat float32 vector (what a data-parallel rank all-reduces); `views`
gives the weight and bias arrays over it without copying, so an update of the vector is an update
of the model."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Shape:
    inputs: int
    hidden: int
    classes: int

    @property
    def sizes(self) -> list[tuple[int, ...]]:
        return [(self.inputs, self.hidden), (self.hidden,), (self.hidden, self.classes), (self.classes,)]

    @property
    def parameters(self) -> int:
        return sum(int(np.prod(s)) for s in self.sizes)


def init(shape: Shape, seed: int) -> np.ndarray:
    """Seeded parameters (Glorot-scaled normal weights, zero biases) as one flat vector."""
    rng = np.random.default_rng(seed)
    flat = np.zeros(shape.parameters, dtype=np.float32)
    w1, _, w2, _ = views(shape, flat)
    w1[:] = rng.normal(0, np.sqrt(2 / (shape.inputs + shape.hidden)), w1.shape)
    w2[:] = rng.normal(0, np.sqrt(2 / (shape.hidden + shape.classes)), w2.shape)
    return flat


def views(shape: Shape, flat: np.ndarray) -> list[np.ndarray]:
    """[W1, b1, W2, b2] over ``flat``."""
    out, at = [], 0
    for s in shape.sizes:
        n = int(np.prod(s))
        out.append(flat[at:at + n].reshape(s))
        at += n
    return out


def _forward(shape: Shape, flat: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    w1, b1, w2, b2 = views(shape, flat)
    h = np.tanh(x @ w1 + b1)
    logits = h @ w2 + b2
    logits = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    return h, p / p.sum(axis=1, keepdims=True)


def loss_and_gradient(shape: Shape, flat: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float, int]:
    """The gradient of the summed (not mean) cross-entropy over the batch, the summed loss and the
    number classified right: sums, so ranks' results add up to the global batch's."""
    w1, b1, w2, b2 = views(shape, flat)
    h, p = _forward(shape, flat, x)
    rows = np.arange(len(y))
    loss = float(-np.log(np.maximum(p[rows, y], 1e-12)).sum())
    correct = int((p.argmax(axis=1) == y).sum())
    d_logits = p.copy()
    d_logits[rows, y] -= 1
    grad = np.zeros_like(flat)
    g1, gb1, g2, gb2 = views(shape, grad)
    g2[:] = h.T @ d_logits
    gb2[:] = d_logits.sum(axis=0)
    d_h = (d_logits @ w2.T) * (1 - h * h)
    g1[:] = x.T @ d_h
    gb1[:] = d_h.sum(axis=0)
    return grad, loss, correct


def accuracy(shape: Shape, flat: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    _, p = _forward(shape, flat, x)
    return float((p.argmax(axis=1) == y).mean())
