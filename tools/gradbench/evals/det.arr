// GradBench `det` (cmpad's det_by_minor): the determinant of an ell x ell
// matrix by expansion by minors along the first row, O(ell!) products.
//
//   "primal":   det(A, ell)                  A: [ell * ell]f64, the input's flat
//                                            row-major `A`; ell: i64
//   "gradient": the gradient of det, A active (`--grad --wrt A`), flat like A
//
//   arrayad run tools/gradbench/evals/det.arr det --args '[[1, 2, 3, 4], 2]' --grad --wrt A
//
// The language has no recursion, so there is one definition per minor size.
// Like cmpad's algorithm, a minor is not copied: detK(A, c) is the
// determinant of the K x K minor of A made of its last K rows (the first
// n - K rows have been removed by the expansions above it) and of the
// columns listed in c, in increasing order. Expanding it along its first
// row, A[n - K], removes column c[j] from the list for the j-th sub-minor:
// `without(c, j)`.
// Gradients stay cheap: the only f64 operations are reads of A, products
// and sums; the column lists are i64 and carry no derivative.

// The column list c without its j-th entry.
def without(c: [k]i64, j: i64) -> [k - 1]i64 = concat(c[0:j], c[j + 1:k])

// The sign (-1)^j of the j-th term of an expansion.
def alt(j: i64) -> f64 = if j % 2 == 0 then 1.0 else -1.0

def det1(A: [n][n]f64, c: [1]i64) -> f64 = A[n - 1, c[0]]

def det2(A: [n][n]f64, c: [2]i64) -> f64 =
  A[n - 2, c[0]] * A[n - 1, c[1]] - A[n - 2, c[1]] * A[n - 1, c[0]]

def det3(A: [n][n]f64, c: [3]i64) -> f64 =
  sum(for j < 3 => alt(j) * A[n - 3, c[j]] * det2(A, without(c, j)))

def det4(A: [n][n]f64, c: [4]i64) -> f64 =
  sum(for j < 4 => alt(j) * A[n - 4, c[j]] * det3(A, without(c, j)))

def det5(A: [n][n]f64, c: [5]i64) -> f64 =
  sum(for j < 5 => alt(j) * A[n - 5, c[j]] * det4(A, without(c, j)))

def det6(A: [n][n]f64, c: [6]i64) -> f64 =
  sum(for j < 6 => alt(j) * A[n - 6, c[j]] * det5(A, without(c, j)))

def det7(A: [n][n]f64, c: [7]i64) -> f64 =
  sum(for j < 7 => alt(j) * A[n - 7, c[j]] * det6(A, without(c, j)))

def det8(A: [n][n]f64, c: [8]i64) -> f64 =
  sum(for j < 8 => alt(j) * A[n - 8, c[j]] * det7(A, without(c, j)))

def det9(A: [n][n]f64, c: [9]i64) -> f64 =
  sum(for j < 9 => alt(j) * A[n - 9, c[j]] * det8(A, without(c, j)))

def det10(A: [n][n]f64, c: [10]i64) -> f64 =
  sum(for j < 10 => alt(j) * A[n - 10, c[j]] * det9(A, without(c, j)))

def det11(A: [n][n]f64, c: [11]i64) -> f64 =
  sum(for j < 11 => alt(j) * A[n - 11, c[j]] * det10(A, without(c, j)))

def det12(A: [n][n]f64, c: [12]i64) -> f64 =
  sum(for j < 12 => alt(j) * A[n - 12, c[j]] * det11(A, without(c, j)))

// The determinant of A: the minor of all rows and all columns (c = 0..n-1)
// of the definition for its size. Sizes 1 to 12 (GradBench uses 5 to 11);
// any other size gives NaN, so a host should reject ell > 12 first.
// (A host may as well call detK(A, c) with K = ell and c = [0, 1, ..., K-1]
// itself: its code is a fraction of the dispatcher's, which holds all twelve.)
def det_matrix(A: [n][n]f64) -> f64 =
  if n == 1 then det1(A, for t < 1 => t)
  else if n == 2 then det2(A, for t < 2 => t)
  else if n == 3 then det3(A, for t < 3 => t)
  else if n == 4 then det4(A, for t < 4 => t)
  else if n == 5 then det5(A, for t < 5 => t)
  else if n == 6 then det6(A, for t < 6 => t)
  else if n == 7 then det7(A, for t < 7 => t)
  else if n == 8 then det8(A, for t < 8 => t)
  else if n == 9 then det9(A, for t < 9 => t)
  else if n == 10 then det10(A, for t < 10 => t)
  else if n == 11 then det11(A, for t < 11 => t)
  else if n == 12 then det12(A, for t < 12 => t)
  else 0.0 / 0.0

// The determinant of the ell x ell matrix whose rows are the flat A's (a
// size mismatch unless A has ell * ell elements).
def det(A: [m]f64, ell: i64) -> f64 = det_matrix(reshape(A, (ell, ell)))
