"""Matrix arithmetic written in an answer: ``A + B``, ``A B``, ``-A``, ``2A`` become one matrix.

Cells stay trees (``Add``/``Mul`` of the entries), so the usual scalar comparison decides each
entry. Shapes that do not fit leave the expression as it was: it then equals nothing.
"""

from __future__ import annotations

from .nodes import Add, Coll, Matrix, Mul, Neg, Node, children

__all__ = ["fold_matrices"]

_MAX_CELLS = 400  # 20 x 20: a product costs n^3 tree nodes; larger is refused (left unfolded)


def fold_matrices(node: Node) -> Node:
    """``node`` with sums, products and negations of matrices computed (top level, lists)."""
    if isinstance(node, Coll):
        return Coll(node.kind, tuple(fold_matrices(i) for i in node.items), node.left, node.right)
    if not isinstance(node, (Add, Mul, Neg)) or not any(
            isinstance(child, Matrix) for child in children(node)):
        return node
    folded = _fold(node)
    return folded if folded is not None else node


def _shape(matrix: Matrix) -> tuple[int, int]:
    return len(matrix.rows), len(matrix.rows[0])


def _fold(node: Node) -> Node | None:
    if isinstance(node, Matrix):
        return node if len(node.rows) * len(node.rows[0]) <= _MAX_CELLS else None
    if isinstance(node, Neg):
        inner = _fold(node.arg)
        return None if not isinstance(inner, Matrix) else _map(inner, Neg)
    if isinstance(node, Add):
        terms = [_fold(t) for t in node.terms]
        if not all(isinstance(t, Matrix) for t in terms):
            return None
        matrices: list[Matrix] = terms  # type: ignore[assignment]
        if len({_shape(m) for m in matrices}) != 1:
            return None
        rows, cols = _shape(matrices[0])
        return Matrix(tuple(tuple(Add(tuple(m.rows[r][c] for m in matrices)) for c in range(cols))
                            for r in range(rows)))
    if isinstance(node, Mul):
        result: Node | None = None
        for factor in node.factors:
            value = _fold(factor) if isinstance(factor, (Matrix, Add, Neg, Mul)) else factor
            if value is None:
                return None
            result = value if result is None else _product(result, value)
            if result is None:
                return None
        return result if isinstance(result, Matrix) else None
    return None


def _map(matrix: Matrix, wrap: type) -> Matrix:
    return Matrix(tuple(tuple(wrap(cell) for cell in row) for row in matrix.rows))


def _product(left: Node, right: Node) -> Node | None:
    if isinstance(left, Matrix) and isinstance(right, Matrix):
        (n, k), (k2, m) = _shape(left), _shape(right)
        if k != k2 or n * m > _MAX_CELLS or n * k * m > _MAX_CELLS * 20:
            return None
        return Matrix(tuple(
            tuple(Add(tuple(Mul((left.rows[i][j], right.rows[j][c])) for j in range(k)))
                  for c in range(m))
            for i in range(n)))
    if isinstance(left, Matrix):
        left, right = right, left
    if isinstance(right, Matrix):  # a scalar times a matrix
        return Matrix(tuple(tuple(Mul((left, cell)) for cell in row) for row in right.rows))
    return Mul((left, right))
