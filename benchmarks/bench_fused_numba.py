"""Exploratory: what a fused (compiled) kernel would give for the 3-way tables (issue 18 item 1).

Not used by dpmatrix and not a dependency: needs ``pip install numba``. With numpy, a 3-way table
of ``dpmatrix.reconstruct.broadcast`` costs one copy of its noisy vector into a zero-bordered
``P``, three sums of ``P`` along its axes, a dozen small face operations and the three broadcast
passes of the plain-numpy floor (``bench_broadcast.floor_pass``): about 2.3–2.5× the floor, most
of the excess in numpy's short inner loops. One compiled loop per table reads ``ω`` once
(accumulating the three sums), completes the faces and writes the table once. This script times
that kernel on random inputs shaped like Synth-10^100's 161,700 three-way tables against the
floor's three passes, and checks it against the numpy face formula.

    pip install numba && python benchmarks/bench_fused_numba.py
"""

from __future__ import annotations

import time

import numpy as np


def kernel():
    from numba import njit

    @njit(cache=False)
    def tables3(W, L0, L1, L2, c1, c2, c3, out):  # pragma: no cover - compiled
        m, r0, r1, r2 = W.shape
        n0, n1, n2 = r0 + 1, r1 + 1, r2 + 1
        s0 = np.zeros((n1, n2))
        s1 = np.zeros((n0, n2))
        s2 = np.zeros((n0, n1))
        f0 = np.empty((n1, n2))
        f1 = np.empty((n0, n2))
        f2 = np.empty((n0, n1))
        s01 = np.zeros(n2)
        s02 = np.zeros(n1)
        s12 = np.zeros(n0)
        for t in range(m):
            s0[:] = 0.0
            s1[:] = 0.0
            s2[:] = 0.0
            s01[:] = 0.0
            s02[:] = 0.0
            s12[:] = 0.0
            for a in range(r0):  # one read of ω: the three sums along the axes
                for b in range(r1):
                    acc = 0.0
                    for c in range(r2):
                        w = W[t, a, b, c]
                        s0[b + 1, c + 1] += w
                        s1[a + 1, c + 1] += w
                        acc += w
                    s2[a + 1, b + 1] = acc
            for b in range(n1):
                for c in range(n2):
                    s01[c] += s0[b, c]
                    s02[b] += s0[b, c]
            for a in range(n0):
                for c in range(n2):
                    s12[a] += s1[a, c]
            s012 = 0.0
            for c in range(n2):
                s012 += s01[c]
            for b in range(n1):
                for c in range(n2):
                    f0[b, c] = L0[t, 0, b, c] + c1 * s0[b, c] + c2 * s01[c] + c2 * s02[b] + c3 * s012
            for a in range(n0):
                for c in range(n2):
                    f1[a, c] = L1[t, a, 0, c] + c1 * s1[a, c] + c2 * s12[a]
            for a in range(n0):
                for b in range(n1):
                    f2[a, b] = L2[t, a, b, 0] + c1 * s2[a, b]
            for a in range(n0):  # one write of the table
                for b in range(n1):
                    for c in range(n2):
                        v = f0[b, c] + f1[a, c] + f2[a, b]
                        if a > 0 and b > 0 and c > 0:
                            v -= W[t, a - 1, b - 1, c - 1]
                        out[t, a, b, c] = v

    return tables3


def main() -> None:
    n, m, k = 10, 65, 3
    rng = np.random.default_rng(0)
    W = rng.standard_normal((m, n - 1, n - 1, n - 1))
    L0, L1, L2 = (rng.standard_normal(s) for s in ((m, 1, n, n), (m, n, 1, n), (m, n, n, 1)))
    coef = [(-1.0) ** (k + t) / n**t for t in (1, 2, 3)]
    out = np.empty((m, n, n, n))
    t0 = time.perf_counter()
    tables3 = kernel()
    tables3(W, L0, L1, L2, *coef, out)
    compile_s = time.perf_counter() - t0
    # the numpy face formula (the module docstring of dpmatrix.reconstruct.broadcast)
    P = np.zeros((m, n, n, n))
    P[:, 1:, 1:, 1:] = W
    S0, S1, S2 = (P.sum(axis=a, keepdims=True) for a in (1, 2, 3))
    S01, S02, S12 = S0.sum(axis=2, keepdims=True), S0.sum(axis=3, keepdims=True), S1.sum(axis=3, keepdims=True)
    S012 = S01.sum(axis=3, keepdims=True)
    F0 = L0 + coef[0] * S0 + coef[1] * (S01 + S02) + coef[2] * S012
    want = F0 + (L1 + coef[0] * S1 + coef[1] * S12) + (L2 + coef[0] * S2) - P
    assert np.allclose(out, want, rtol=1e-12, atol=1e-12)
    reps = 161_700 // m
    best = {}
    for _ in range(5):
        for name, fn in (
            ("numpy floor (3 broadcast passes)", lambda: (np.add(P, L0, out=out), np.add(out, L1, out=out), np.add(out, L2, out=out))),
            ("fused kernel (sums, faces, table)", lambda: tables3(W, L0, L1, L2, *coef, out)),
        ):
            t0 = time.process_time()
            for _ in range(reps):
                fn()
            best[name] = min(best.get(name, np.inf), time.process_time() - t0)
    print(f"first call (compilation) {compile_s:.1f} s; {reps * m:,} tables of {n}^3 cells, processor time:")
    for name, t in best.items():
        print(f"  {name:36s} {t:.3f} s")


if __name__ == "__main__":
    main()
