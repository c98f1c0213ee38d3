// GradBench `kmeans`: the k-means cost and its Newton direction.
//
//   cost(P, C) = sum_i min_j |C_j - P_i|^2
//
//   "cost": cost(points, centroids)          points: [n][d]f64, centroids: [k][d]f64
//                                            (the input's `points`, `centroids`)
//   "dir":  dir(points, centroids) -> [k][d]f64, the output list of lists:
//           J * H^-1 with J the gradient of cost with respect to C and H
//           its Hessian, which is diagonal (2 * the size of cluster j on
//           the entries of centroid j), so H^-1 is elementwise 1 / H and the
//           diagonal is the Hessian-vector product with the all-ones vector.
//           Both come from one forward-over-reverse pass: the jvp of the
//           gradient gives the gradient as its value and H 1 as its tangent.
//
//   arrayad run tools/gradbench/evals/kmeans.arr dir --args '[[[0, 0], [1, 1], [4, 4]], [[0, 1], [4, 5]]]'

// |a - b|^2 for two points.
def sq_dist(a: [d]f64, b: [d]f64) -> f64 =
  let v = a - b
  in dot(v, v)

def cost(points: [n][d]f64, centroids: [k][d]f64) -> f64 =
  sum(for i < n => minimum(for j < k => sq_dist(points[i], centroids[j])))

// J: the gradient of the cost with respect to the centroids.
def cost_grad(points: [n][d]f64, centroids: [k][d]f64) -> [k][d]f64 =
  grad(cost, (points, centroids)).1

def dir(points: [n][d]f64, centroids: [k][d]f64) -> [k][d]f64 =
  let no_points = for i < n, l < d => 0.0
  let ones = for j < k, l < d => 1.0
  let (jac, hess_diag) = jvp(cost_grad, (points, centroids), (no_points, ones))
  in jac / hess_diag
