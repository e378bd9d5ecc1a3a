"""The small linear solve the derivation scripts share (no numpy: the scripts run on a bare
Python 3)."""


def solve(a, b):
    """`x` with `a x = b` (Gaussian elimination with partial pivoting)."""
    n = len(a)
    m = [row[:] + [v] for row, v in zip(a, b)]
    for i in range(n):
        p = max(range(i, n), key=lambda k: abs(m[k][i]))
        m[i], m[p] = m[p], m[i]
        for k in range(n):
            if k != i:
                f = m[k][i] / m[i][i]
                m[k] = [x - f * y for x, y in zip(m[k], m[i])]
    return [m[i][n] / m[i][i] for i in range(n)]
