// ADBench bundle adjustment (shared/data/adbench/README.md, "BA"): the
// residuals of one observation of point X by camera cam, with weight w and
// measured feature feat. Each camera is 11 values: [0..2] the rotation as an
// angle-axis vector, [3..5] the centre, [6] the focal length, [7..8] the
// principal point, [9..10] the radial distortion coefficients.
//
// The Jacobian of a whole problem is block sparse: examples/ba/main.c calls
// ba_obs_jacobian once per observation (3 x 15: the 11 camera, 3 point and 1
// weight columns) and scatters the blocks into a CSR matrix.
//
//   arrayad build examples/ba.arr -o libba.so --export ba_obs --wrt cam,x,w

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

// The pixel coordinates of x seen by camera cam: rotate into the camera
// frame, perspective division, radial distortion, focal length and centre.
def project(cam: [11]f64, x: [3]f64) -> [2]f64 =
  let y = rotate(cam[0:3], x - cam[3:6])
  let u = y[0] / y[2]
  let v = y[1] / y[2]
  let rsq = u * u + v * v
  let l = 1.0 + cam[9] * rsq + cam[10] * rsq * rsq
  in [u * l * cam[6] + cam[7], v * l * cam[6] + cam[8]]

// The residuals of one observation: the weighted reprojection error (2)
// and the weight error 1 - w^2.
def ba_obs(cam: [11]f64, x: [3]f64, w: f64, feat: [2]f64) -> [3]f64 =
  let proj = project(cam, x)
  in [w * (proj[0] - feat[0]), w * (proj[1] - feat[1]), 1.0 - w * w]

// The 3 x 15 Jacobian blocks of all p observations in one call (LANGUAGE.md
// section 10): block i row r is the vjp of observation i with the
// cotangent e_r, its columns the 11 camera, 3 point and 1 weight
// derivatives, as ba_obs_jacobian gives them one call at a time.
def ba_jacobian_blocks(cams: [p][11]f64, xs: [p][3]f64, ws: [p]f64, feats: [p][2]f64) -> [p][3][15]f64 =
  for i < p, r < 3 =>
    let (_, ct) = vjp(ba_obs, (cams[i], xs[i], ws[i], feats[i]),
                      for k < 3 => if k == r then 1.0 else 0.0)
    let (dcam, dx, dw, _) = ct
    in for c < 15 => if c < 11 then dcam[c] else if c < 14 then dx[c - 11] else dw
