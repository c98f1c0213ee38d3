// GradBench `ht` (hand tracking, from ADBench; gradbench evals/ht/README.md):
// the residuals between measured 3-D points and a skinned, posed hand model,
// and their Jacobian with respect to the pose (and, in the "complicated"
// case, the points' barycentric coordinates on the mesh).
//
// Shapes (nb bones, nv vertices, nt triangles, n measured points):
//   theta:                  [26]       global rotation (angle-axis, 3), global
//                                      translation (3), then 4 angles for each of
//                                      the 5 fingers
//   us:                     [n][2]     complicated case only: point i lies at
//                                      us[i,0] v0 + us[i,1] v1 + (1 - us[i,0] - us[i,1]) v2
//                                      on triangle correspondences[i] = (v0, v1, v2)
//   parents:                [nb]       parent bone, -1 for a root; parents come first
//   base_relatives:         [nb][4][4] each bone's rest transform relative to its parent
//   inverse_base_absolutes: [nb][4][4] inverses of the bones' absolute rest transforms
//   base_positions:         [nv][4]    homogeneous rest positions of the vertices
//   weights:                [nv][nb]   skinning weights (vertex, bone)
//   triangles:              [nt][3]    vertex indices of the mesh triangles
//   is_mirrored:            bool       negate x of the skinned hand (a left hand)
//   correspondences:        [n]        per point a vertex (simple) or a triangle
//                                      (complicated)
//   points:                 [n][3]     the measured points
//
// Results in GradBench's form: residuals [n * 3] (3 per point), Jacobians
// [n * 3][26] (simple) and [n * 3][28] (complicated: column 0 the derivative
// by every point's us[i,0], column 1 by us[i,1], columns 2..27 by theta).
//
// A host calls ht_objective_simple / ht_jacobian_simple when `us` is empty and
// ht_objective_complicated / ht_jacobian_complicated otherwise, with the fields
// above as the arguments in parameter order (`bone_count` and `bone_names` are
// not needed: the sizes come from the arrays).
//
//   arrayad run tools/gradbench/evals/ht.arr ht_jacobian_complicated --args ARGS.json

// ---------------------------------------------------------------- 3-D helpers

def matmul(a: [n][k]f64, b: [k][m]f64) -> [n][m]f64 =
  for i < n, j < m => sum(for l < k => a[i, l] * b[l, j])

def matvec(a: [n][m]f64, x: [m]f64) -> [n]f64 =
  for i < n => dot(a[i], x)

// Rodrigues' formula: the rotation by |w| about w / |w| (the identity for a
// tiny w, as in the reference).
def angle_axis_to_rotation(w: [3]f64) -> [3][3]f64 =
  let norm = sqrt(dot(w, w))
  in if norm < 0.0001 then [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
     else
       let x = w[0] / norm
       let y = w[1] / norm
       let z = w[2] / norm
       let s = sin(norm)
       let c = cos(norm)
       in [[x * x + (1.0 - x * x) * c, x * y * (1.0 - c) - z * s, x * z * (1.0 - c) + y * s],
           [x * y * (1.0 - c) + z * s, y * y + (1.0 - y * y) * c, y * z * (1.0 - c) - x * s],
           [x * z * (1.0 - c) - y * s, z * y * (1.0 - c) + x * s, z * z + (1.0 - z * z) * c]]

// Euler angles stored in the order (x, z, y): R = Rz Ry Rx.
def euler_angles_to_rotation(xzy: [3]f64) -> [3][3]f64 =
  let tx = xzy[0]
  let tz = xzy[1]
  let ty = xzy[2]
  let rx = [[1.0, 0.0, 0.0], [0.0, cos(tx), -sin(tx)], [0.0, sin(tx), cos(tx)]]
  let ry = [[cos(ty), 0.0, sin(ty)], [0.0, 1.0, 0.0], [-sin(ty), 0.0, cos(ty)]]
  let rz = [[cos(tz), -sin(tz), 0.0], [sin(tz), cos(tz), 0.0], [0.0, 0.0, 1.0]]
  in matmul(matmul(rz, ry), rx)

// ------------------------------------------------------------------ the pose

// The Euler angles (x, z, y) of bone b from theta. Bones are ordered wrist,
// then 4 per finger (thumb, index, middle, ring, pinky; base first), then the
// forearm. Finger f owns theta[6 + 4f .. 10 + 4f]: the x and z angles of its
// second bone, the x angle of its third and of its fourth. All other bones
// (and every y angle) stay at 0.
def bone_angles(theta: [26]f64, b: i64) -> [3]f64 =
  let k = (b - 1) % 4            // position within the finger, 0 = base
  let i = 6 + 4 * ((b - 1) / 4)  // the finger's first theta
  in if b < 1 || b > 20 || k == 0 then [0.0, 0.0, 0.0]
     else if k == 1 then [theta[i], theta[i + 1], 0.0]
     else [theta[i + k], 0.0, 0.0]

// Each bone's transform relative to its parent once posed: its rest
// transform followed by its rotation, base_relatives[b] * [[R, 0], [0, 1]].
def posed_relatives(theta: [26]f64, base_relatives: [nb][4][4]f64) -> [nb][4][4]f64 =
  for b < nb =>
    let r = euler_angles_to_rotation(bone_angles(theta, b))
    let tr = for i < 4, j < 4 =>
      if i < 3 && j < 3 then r[i, j] else if i == j then 1.0 else 0.0
    in matmul(base_relatives[b], tr)

// Absolute transforms: the parent's absolute times the bone's relative, in
// bone order (every parent comes before its children).
def relatives_to_absolutes(relatives: [nb][4][4]f64, parents: [nb]i64) -> [nb][4][4]f64 =
  loop absolutes = relatives for b < nb do
    let p = parents[b]
    in if p == -1 then absolutes else absolutes with [b] = matmul(absolutes[p], relatives[b])

// The posed hand: every vertex skinned (the weighted sum over the bones of
// the vertex moved by the bone's transform), optionally mirrored, then
// rotated by theta[0:3] and translated by theta[3:6]. Result [nv][3].
// (The reference also scales the rotation's columns by a scale that is
// always 1; that is left out.) A vertex follows few bones: most weights are
// zero (92% of the published model's 10,000 x 22), so the sum over the bones
// skips them, in the primal and in every tangent direction, and adds into
// one running 3-vector rather than building a [nb][3] array per vertex.
// The positions equal the dense sum's up to rounding (this adds left to
// right, `sum` in its own fixed order) except where a transform or a rest
// position is not finite; the derivative by a weight that is exactly zero
// is 0 here (a branch is differentiated where it is taken), which GradBench,
// differentiating by theta and us only, never asks for.
def vertex_positions(theta: [26]f64, parents: [nb]i64,
                     base_relatives: [nb][4][4]f64, inverse_base_absolutes: [nb][4][4]f64,
                     base_positions: [nv][4]f64, weights: [nv][nb]f64,
                     is_mirrored: bool) -> [nv][3]f64 =
  let absolutes = relatives_to_absolutes(posed_relatives(theta, base_relatives), parents)
  // the rest pose to the posed pose, per bone; only the first 3 rows matter
  let transforms = for b < nb => matmul(absolutes[b], inverse_base_absolutes[b])[0:3]
  let rotation = angle_axis_to_rotation(theta[0:3])
  in for v < nv =>
    let skinned = loop acc = [0.0, 0.0, 0.0] for b < nb do
      let w = weights[v, b]
      in if w == 0.0 then acc else acc + w * matvec(transforms[b], base_positions[v])
    let p = if is_mirrored then [-skinned[0], skinned[1], skinned[2]] else skinned
    in matvec(rotation, p) + theta[3:6]

// ------------------------------------------------------------ the objectives

// Simple case: point i corresponds to vertex correspondences[i].
def ht_objective_simple(theta: [26]f64, parents: [nb]i64,
                        base_relatives: [nb][4][4]f64, inverse_base_absolutes: [nb][4][4]f64,
                        base_positions: [nv][4]f64, weights: [nv][nb]f64,
                        is_mirrored: bool, correspondences: [n]i64,
                        points: [n][3]f64) -> [n * 3]f64 =
  let verts = vertex_positions(theta, parents, base_relatives, inverse_base_absolutes,
                               base_positions, weights, is_mirrored)
  in flatten(for i < n => points[i] - verts[correspondences[i]])

// Complicated case: point i corresponds to a point (given by us[i]) on
// triangle correspondences[i].
def ht_objective_complicated(theta: [26]f64, us: [n][2]f64, parents: [nb]i64,
                             base_relatives: [nb][4][4]f64, inverse_base_absolutes: [nb][4][4]f64,
                             base_positions: [nv][4]f64, weights: [nv][nb]f64,
                             triangles: [nt][3]i64, is_mirrored: bool,
                             correspondences: [n]i64, points: [n][3]f64) -> [n * 3]f64 =
  let verts = vertex_positions(theta, parents, base_relatives, inverse_base_absolutes,
                               base_positions, weights, is_mirrored)
  in flatten(for i < n =>
    let t = triangles[correspondences[i]]
    let u = us[i]
    in points[i] - (u[0] * verts[t[0]] + u[1] * verts[t[1]] + (1.0 - u[0] - u[1]) * verts[t[2]]))

// ------------------------------------------------------------- the Jacobians

// One forward pass per theta column, transposed into GradBench's layout:
// jac[r, k] = d residual[r] / d theta[k]. The model and the points are
// constants (zero tangents).
def ht_jacobian_simple(theta: [26]f64, parents: [nb]i64,
                       base_relatives: [nb][4][4]f64, inverse_base_absolutes: [nb][4][4]f64,
                       base_positions: [nv][4]f64, weights: [nv][nb]f64,
                       is_mirrored: bool, correspondences: [n]i64,
                       points: [n][3]f64) -> [n * 3][26]f64 =
  let zero_transforms = for b < nb, i < 4, j < 4 => 0.0
  let zero_positions = for v < nv, j < 4 => 0.0
  let zero_weights = for v < nv, b < nb => 0.0
  let zero_points = for i < n, j < 3 => 0.0
  let columns = for k < 26 =>
    let dtheta = for j < 26 => if j == k then 1.0 else 0.0
    in jvp(ht_objective_simple,
           (theta, parents, base_relatives, inverse_base_absolutes, base_positions, weights,
            is_mirrored, correspondences, points),
           (dtheta, parents, zero_transforms, zero_transforms, zero_positions, zero_weights,
            is_mirrored, correspondences, zero_points)).1
  in for r < n * 3, k < 26 => columns[k, r]

// Columns 0 and 1: every point's us[i,0] (then us[i,1]) perturbed at once,
// since residual i depends on us[i] only; then one column per theta.
def ht_jacobian_complicated(theta: [26]f64, us: [n][2]f64, parents: [nb]i64,
                            base_relatives: [nb][4][4]f64, inverse_base_absolutes: [nb][4][4]f64,
                            base_positions: [nv][4]f64, weights: [nv][nb]f64,
                            triangles: [nt][3]i64, is_mirrored: bool,
                            correspondences: [n]i64, points: [n][3]f64) -> [n * 3][28]f64 =
  let zero_transforms = for b < nb, i < 4, j < 4 => 0.0
  let zero_positions = for v < nv, j < 4 => 0.0
  let zero_weights = for v < nv, b < nb => 0.0
  let zero_points = for i < n, j < 3 => 0.0
  let columns = for k < 28 =>
    let dus = for i < n, j < 2 => if j == k then 1.0 else 0.0     // zero for k >= 2
    let dtheta = for j < 26 => if j == k - 2 then 1.0 else 0.0    // zero for k < 2
    in jvp(ht_objective_complicated,
           (theta, us, parents, base_relatives, inverse_base_absolutes, base_positions, weights,
            triangles, is_mirrored, correspondences, points),
           (dtheta, dus, parents, zero_transforms, zero_transforms, zero_positions, zero_weights,
            triangles, is_mirrored, correspondences, zero_points)).1
  in for r < n * 3, k < 28 => columns[k, r]
