// GradBench `ba` (evals/ba/README.md): bundle adjustment. The residuals of p
// observations of m points by n cameras, and the sparse Jacobian of the
// residuals with respect to all cameras, points and weights.
//
// Each camera is 11 values: [0..2] the rotation as an angle-axis vector,
// [3..5] the centre, [6] the focal length, [7..8] the principal point,
// [9..10] the radial distortion coefficients.
//
//   cams:  [n][11]f64  cameras
//   xs:    [m][3]f64   points
//   ws:    [p]f64      weights, one per observation
//   obs:   [p][2]i64   observation i sees point obs[i, 1] with camera obs[i, 0]
//   feats: [p][2]f64   observation i measured the point at pixel feats[i]
//
// GradBench sends one camera, point, weight and feature and the counts n, m,
// p; the problem is these duplicated (cams[i] = cam, xs[j] = x, ws[i] = w,
// feats[i] = feat) with obs[i] = [i % n, i % m]. Nothing below relies on the
// duplication: every observation is computed.
//
//   objective: ba_objective (primal)
//   jacobian:  ba_jacobian (primal; the derivatives are taken inside it)

def cross(a: [3]f64, b: [3]f64) -> [3]f64 =
  [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]

// Rodrigues' rotation of y by the angle-axis vector r (the first-order form
// y + r x y when r is exactly zero).
def rotate(r: [3]f64, y: [3]f64) -> [3]f64 =
  let sqtheta = dot(r, r)
  in if sqtheta != 0.0 then
       let theta = sqrt(sqtheta)
       let c = cos(theta)
       let s = sin(theta)
       let w = r * (1.0 / theta)
       in y * c + cross(w, y) * s + w * (dot(w, y) * (1.0 - c))
     else y + cross(r, y)

// The pixel coordinates of point x seen by camera cam: rotate into the
// camera frame, perspective division, radial distortion, focal length and
// principal point.
def project(cam: [11]f64, x: [3]f64) -> [2]f64 =
  let y = rotate(cam[0:3], x - cam[3:6])
  let u = y[0] / y[2]
  let v = y[1] / y[2]
  let rsq = u * u + v * v
  let distortion = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq
  in [u * distortion * cam[6] + cam[7], v * distortion * cam[6] + cam[8]]

// The weighted reprojection error of one observation, [2].
def reproj_error(cam: [11]f64, x: [3]f64, w: f64, feat: [2]f64) -> [2]f64 =
  w * (project(cam, x) - feat)

// The weight error of one observation.
def w_error(w: f64) -> f64 = 1.0 - w * w

def ba_objective(cams: [n][11]f64, xs: [m][3]f64, ws: [p]f64, obs: [p][2]i64,
                 feats: [p][2]f64) -> ([p][2]f64, [p]f64) =
  let reproj_err = for i < p => reproj_error(cams[obs[i, 0]], xs[obs[i, 1]], ws[i], feats[i])
  let w_err = for i < p => w_error(ws[i])
  in (reproj_err, w_err)

// The nonzero 2 x 15 block of the Jacobian of one observation's reprojection
// error: row r (one reverse pass, cotangent e_r) holds the derivatives of
// error r with respect to the 11 camera parameters, the 3 point coordinates
// and the weight, in this order.
def reproj_block(cam: [11]f64, x: [3]f64, w: f64, feat: [2]f64) -> [2][15]f64 =
  for r < 2 =>
    let (_, (dcam, dx, dw, _)) = vjp(reproj_error, (cam, x, w, feat), [0.0, 0.0] with [r] = 1.0)
    in concat(concat(dcam, dx), [dw])

// The Jacobian of (reproj_err flattened [2p], w_err [p]) with respect to
// (cams flattened [11n], xs flattened [3m], ws [p]): 3p rows, 11n + 3m + p
// columns, 31p nonzeros, as the compressed sparse rows (CSR) of GradBench's
// reference (cpp/gradbench/evals/ba.hpp, SparseMat):
//   rows: [3p + 1] row pointers: row 2i + r (reprojection error r of
//         observation i) starts at 30i + 15r; row 2p + i (weight error i) at
//         30p + i; the last pointer is the number of nonzeros, 31p.
//   cols, vals: [31p] column indices and values of the nonzeros, row by row:
//         first the 30 entries of every observation's reprojection block
//         (2 rows of 15: camera columns 11 obs[i,0] + j, point columns
//         11n + 3 obs[i,1] + j, weight column 11n + 3m + i), then the p
//         entries of the weight errors (column 11n + 3m + i, value -2 w_i).
def ba_jacobian(cams: [n][11]f64, xs: [m][3]f64, ws: [p]f64, obs: [p][2]i64,
                feats: [p][2]f64) -> ([3 * p + 1]i64, [31 * p]i64, [31 * p]f64) =
  let rows = for r < 3 * p + 1 => if r <= 2 * p then 15 * r else 30 * p + (r - 2 * p)
  let cols_reproj = for i < p, r < 2, c < 15 =>
    if c < 11 then 11 * obs[i, 0] + c
    else if c < 14 then 11 * n + 3 * obs[i, 1] + (c - 11)
    else 11 * n + 3 * m + i
  let vals_reproj = for i < p => reproj_block(cams[obs[i, 0]], xs[obs[i, 1]], ws[i], feats[i])
  let cols_w = for i < p => 11 * n + 3 * m + i
  let vals_w = for i < p => grad(w_error, ws[i])
  in (rows, concat(flatten(flatten(cols_reproj)), cols_w), concat(flatten(flatten(vals_reproj)), vals_w))
