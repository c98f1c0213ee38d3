//! `arrayad.Function`: one definition of a compiled module, called on
//! Python values, with its derivatives.

use crate::convert::{self, flatten, leaf_of, structure, Leaf};
use crate::errors::{self, guarded, to_py};
use arrayad::{Arg, Scalar, SrcType, Value};
use numpy::ndarray::Array2;
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use std::collections::HashMap;
use std::sync::Mutex;

/// One source parameter: its leaves are `first..first + leaves` of the
/// flattened arguments.
struct Param {
    name: String,
    ty: SrcType,
    first: usize,
    leaves: usize,
    has_f64: bool,
}

/// The parameters a derivative is taken with respect to, as one call asked
/// for them.
struct Wrt {
    /// Parameter indices in the order asked for.
    params: Vec<usize>,
    /// One parameter named alone (`wrt="x"`, `wrt=0`, or a definition with
    /// a single active parameter and no `wrt`): its derivative is returned
    /// as it is, not in a tuple.
    single: bool,
    /// The handle that differentiates exactly these parameters.
    handle: arrayad::Function,
}

/// A definition of a compiled :class:`Module`.
///
/// Call it like a Python function: ``f(x, w)`` (or with keywords,
/// ``f(x=x, w=w)``). Arguments are numpy arrays, Python scalars, lists, or
/// tuples for tuple parameters; results are floats, ints, bools, numpy
/// arrays, and tuples for tuple results.
///
/// Derivatives: :meth:`grad`, :meth:`value_and_grad`, :meth:`vjp`,
/// :meth:`jvp`, :meth:`jacobian`, :meth:`hvp` and :meth:`hessian`, each
/// with ``wrt=`` (parameter names or positions; default: the module's
/// active parameters, every parameter with f64 parts unless ``compile`` was
/// given ``wrt``).
#[pyclass(frozen, module = "arrayad", name = "Function")]
pub struct Function {
    /// The handle for the module's default active parameters.
    f: arrayad::Function,
    params: Vec<Param>,
    result: SrcType,
    leaves: usize,
    /// The parameters that are active by default, in order.
    default_wrt: Vec<usize>,
    /// Handles for other sets of parameters (sorted indices), made on first
    /// use; their derivative code is compiled on first use and kept by the
    /// module.
    others: Mutex<HashMap<Vec<usize>, arrayad::Function>>,
}

impl Function {
    pub(crate) fn new(f: arrayad::Function) -> Function {
        let sig = f.signature().clone();
        let mut params = Vec::new();
        let mut first = 0;
        for p in &sig.params {
            let leaves = p.ty.leaves();
            let has_f64 = leaves.iter().any(|t| t.elem == Scalar::F64);
            params.push(Param { name: p.name.clone(), ty: p.ty.clone(), first, leaves: leaves.len(), has_f64 });
            first += leaves.len();
        }
        let active = f.active();
        let default_wrt = params
            .iter()
            .enumerate()
            .filter(|(_, p)| active[p.first..p.first + p.leaves].iter().any(|a| *a))
            .map(|(i, _)| i)
            .collect();
        Function { f, params, result: sig.result, leaves: first, default_wrt, others: Mutex::new(HashMap::new()) }
    }

    fn name(&self) -> &str {
        self.f.name()
    }

    fn signature_text(&self) -> String {
        let params: Vec<String> = self.params.iter().map(|p| format!("{}: {}", p.name, p.ty)).collect();
        format!("def {}({}) -> {}", self.name(), params.join(", "), self.result)
    }

    fn param_list(&self) -> String {
        let params: Vec<String> = self.params.iter().map(|p| format!("{}: {}", p.name, p.ty)).collect();
        params.join(", ")
    }

    // ---- arguments ------------------------------------------------------------

    /// The argument leaves of a call with positional `args` and keyword
    /// `kwargs` (parameter names).
    fn bind<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Vec<Leaf<'py>>> {
        let kwargs = kwargs.filter(|k| !k.is_empty());
        let n = self.params.len();
        let fname = self.name();
        let what = |leaf: &str| format!("argument `{leaf}` of `{fname}`");
        let mut out = Vec::with_capacity(self.leaves);
        let Some(kwargs) = kwargs else {
            if args.len() != n {
                return Err(self.count_error(py, args.len()));
            }
            for (p, obj) in self.params.iter().zip(args.iter()) {
                flatten(&obj, &p.ty, &what, &p.name, &mut out)?;
            }
            return Ok(out);
        };
        if args.len() > n {
            return Err(self.count_error(py, args.len() + kwargs.len()));
        }
        let mut slots: Vec<Option<Bound<'py, PyAny>>> = args.iter().map(Some).collect();
        slots.resize(n, None);
        for (key, value) in kwargs.iter() {
            let key: String = key.extract()?;
            let Some(k) = self.params.iter().position(|p| p.name == key) else {
                return Err(errors::argument(
                    py,
                    format!("`{fname}` has no parameter `{key}` (its parameters: {})", self.param_list()),
                ));
            };
            if slots[k].is_some() {
                return Err(errors::argument(py, format!("`{fname}` got two values for argument `{key}`")));
            }
            slots[k] = Some(value);
        }
        for (p, slot) in self.params.iter().zip(&slots) {
            let Some(obj) = slot else {
                return Err(errors::argument(
                    py,
                    format!("`{fname}` is missing argument `{}` (its parameters: {})", p.name, self.param_list()),
                ));
            };
            flatten(obj, &p.ty, &what, &p.name, &mut out)?;
        }
        Ok(out)
    }

    fn count_error(&self, py: Python<'_>, got: usize) -> PyErr {
        let n = self.params.len();
        errors::argument(
            py,
            format!(
                "`{}` takes {n} argument{} ({}), got {got}",
                self.name(),
                if n == 1 { "" } else { "s" },
                self.param_list()
            ),
        )
    }

    /// The argument leaves of `primals`: a tuple (or list) with one value
    /// per parameter.
    fn bind_primals<'py>(&self, py: Python<'py>, primals: &Bound<'py, PyAny>) -> PyResult<Vec<Leaf<'py>>> {
        let items = self.per_parameter(py, primals, "primals")?;
        self.bind(py, &items, None)
    }

    /// `obj` as a tuple with one entry per parameter (`what`: `primals`,
    /// `tangents`).
    fn per_parameter<'py>(
        &self,
        py: Python<'py>,
        obj: &Bound<'py, PyAny>,
        what: &str,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let items = if let Ok(t) = obj.cast::<PyTuple>() {
            t.clone()
        } else if let Ok(l) = obj.cast::<PyList>() {
            l.to_tuple()
        } else {
            return Err(errors::argument(
                py,
                format!(
                    "the {what} of `{}` must be a tuple with one entry per parameter ({}), got {}",
                    self.name(),
                    self.param_list(),
                    obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ),
            ));
        };
        if items.len() != self.params.len() {
            return Err(errors::argument(
                py,
                format!(
                    "the {what} of `{}` must have one entry per parameter ({}): {} entries, got {}",
                    self.name(),
                    self.param_list(),
                    self.params.len(),
                    items.len()
                ),
            ));
        }
        Ok(items)
    }

    /// The tangent leaves of `tangents` (one entry per parameter, `None`
    /// for a zero tangent).
    fn bind_tangents<'py>(&self, py: Python<'py>, tangents: &Bound<'py, PyAny>) -> PyResult<Vec<Option<Leaf<'py>>>> {
        let items = self.per_parameter(py, tangents, "tangents")?;
        let fname = self.name();
        let what = |leaf: &str| format!("the tangent of `{leaf}` of `{fname}`");
        let mut out = Vec::with_capacity(self.leaves);
        for (p, obj) in self.params.iter().zip(items.iter()) {
            flatten_optional(&obj, &p.ty, &what, &p.name, &mut out)?;
        }
        Ok(out)
    }

    /// The cotangent leaves of `cotangent` (shaped like the result, `None`
    /// for zero).
    fn bind_cotangent<'py>(&self, cotangent: &Bound<'py, PyAny>) -> PyResult<Vec<Option<Leaf<'py>>>> {
        let fname = self.name();
        let what = |leaf: &str| format!("the cotangent of the {leaf} of `{fname}`");
        let mut out = Vec::new();
        flatten_optional(cotangent, &self.result, &what, "result", &mut out)?;
        Ok(out)
    }

    // ---- wrt --------------------------------------------------------------------

    /// The parameter that `item` (a name or a position) designates.
    fn param_index(&self, py: Python<'_>, item: &Bound<'_, PyAny>) -> PyResult<usize> {
        let n = self.params.len();
        let k = if let Ok(s) = item.cast::<PyString>() {
            let name = s.to_string();
            self.params.iter().position(|p| p.name == name).ok_or_else(|| {
                errors::usage(
                    py,
                    format!("`{name}` is not a parameter of `{}` (its parameters: {})", self.name(), self.param_list()),
                )
            })?
        } else if item.is_instance_of::<pyo3::types::PyInt>() && !item.is_instance_of::<pyo3::types::PyBool>() {
            let i: i64 =
                item.extract().map_err(|_| errors::usage(py, format!("wrt position {item} is out of range")))?;
            let k = if i < 0 { i + n as i64 } else { i };
            if k < 0 || k >= n as i64 {
                return Err(errors::usage(
                    py,
                    format!(
                        "wrt position {i} is out of range: `{}` has {n} parameters ({})",
                        self.name(),
                        self.param_list()
                    ),
                ));
            }
            k as usize
        } else {
            return Err(errors::argument(
                py,
                format!(
                    "wrt must be a parameter name or position, or a tuple of them, got {}",
                    item.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ),
            ));
        };
        if !self.params[k].has_f64 {
            let p = &self.params[k];
            return Err(errors::usage(
                py,
                format!(
                    "parameter `{}: {}` of `{}` has no f64 parts: it cannot be differentiated",
                    p.name,
                    p.ty,
                    self.name()
                ),
            ));
        }
        Ok(k)
    }

    /// The parameters of `wrt` (`None`: the default ones) and their handle.
    fn wrt(&self, py: Python<'_>, wrt: Option<&Bound<'_, PyAny>>) -> PyResult<Wrt> {
        let Some(wrt) = wrt.filter(|w| !w.is_none()) else {
            return Ok(Wrt {
                params: self.default_wrt.clone(),
                single: self.default_wrt.len() == 1,
                handle: self.f.clone(),
            });
        };
        let (params, single) = if let Ok(t) = wrt.cast::<PyTuple>() {
            (t.iter().map(|i| self.param_index(py, &i)).collect::<PyResult<Vec<_>>>()?, false)
        } else if let Ok(l) = wrt.cast::<PyList>() {
            (l.iter().map(|i| self.param_index(py, &i)).collect::<PyResult<Vec<_>>>()?, false)
        } else {
            (vec![self.param_index(py, wrt)?], true)
        };
        let mut set = params.clone();
        set.sort_unstable();
        if let Some(w) = set.windows(2).find(|w| w[0] == w[1]) {
            return Err(errors::usage(py, format!("wrt names parameter `{}` twice", self.params[w[0]].name)));
        }
        let handle = if set == self.default_wrt {
            self.f.clone()
        } else {
            let mut others = self.others.lock().unwrap_or_else(|p| p.into_inner());
            match others.get(&set) {
                Some(h) => h.clone(),
                None => {
                    let names: Vec<&str> = set.iter().map(|&k| self.params[k].name.as_str()).collect();
                    let h = self.f.with_wrt(&names).map_err(|e| to_py(py, e))?;
                    others.insert(set, h.clone());
                    h
                }
            }
        };
        Ok(Wrt { params, single, handle })
    }

    // ---- results ----------------------------------------------------------------

    /// The result leaves shaped like the result type.
    fn result_to_py<'py>(&self, py: Python<'py>, values: Vec<Value>) -> PyResult<Bound<'py, PyAny>> {
        structure(py, &self.result, &mut values.into_iter().map(Some))
    }

    /// Per-leaf derivatives (one entry per argument leaf) as the caller
    /// asked for them: the derivative of the one parameter, or a tuple in
    /// the order of `wrt`.
    fn per_param<'py>(&self, py: Python<'py>, w: &Wrt, mut values: Vec<Option<Value>>) -> PyResult<Bound<'py, PyAny>> {
        if values.len() != self.leaves {
            return Err(errors::internal(py, format!("{} derivative leaves, expected {}", values.len(), self.leaves)));
        }
        let mut outs = Vec::with_capacity(w.params.len());
        for &k in &w.params {
            let p = &self.params[k];
            let mut it = values[p.first..p.first + p.leaves].iter_mut().map(Option::take);
            outs.push(structure(py, &p.ty, &mut it)?);
        }
        if w.single {
            if let Some(one) = outs.pop() {
                return Ok(one);
            }
        }
        Ok(PyTuple::new(py, outs)?.into_any())
    }

    /// The columns of a Jacobian in the order of `w.params` (arrayad orders
    /// them by parameter): `None` when that is already the order, else for
    /// each new column its old column.
    fn column_order(&self, w: &Wrt, leaves: &[Leaf<'_>]) -> Option<Vec<usize>> {
        if w.params.windows(2).all(|p| p[0] < p[1]) {
            return None;
        }
        let active = w.handle.active();
        let mut start = vec![0usize; leaves.len()];
        let mut col = 0;
        for (k, leaf) in leaves.iter().enumerate() {
            start[k] = col;
            if active.get(k).copied().unwrap_or(false) {
                col += leaf.len();
            }
        }
        let mut order = Vec::with_capacity(col);
        for &p in &w.params {
            let p = &self.params[p];
            for k in p.first..p.first + p.leaves {
                if active.get(k).copied().unwrap_or(false) {
                    order.extend(start[k]..start[k] + leaves[k].len());
                }
            }
        }
        Some(order)
    }
}

/// Like [`flatten`], for tangents and cotangents: `None` (at any level)
/// stands for zero; leaves are f64 scalars or arrays of the leaf's rank,
/// and leaves without f64 elements take `None` only.
fn flatten_optional<'py>(
    obj: &Bound<'py, PyAny>,
    ty: &SrcType,
    what: &dyn Fn(&str) -> String,
    name: &str,
    out: &mut Vec<Option<Leaf<'py>>>,
) -> PyResult<()> {
    let py = obj.py();
    if obj.is_none() {
        out.extend(std::iter::repeat_with(|| None).take(ty.leaves().len()));
        return Ok(());
    }
    match ty {
        SrcType::Tuple(ts) => {
            let items: Vec<Bound<'py, PyAny>> = if let Ok(t) = obj.cast::<PyTuple>() {
                t.iter().collect()
            } else if let Ok(l) = obj.cast::<PyList>() {
                l.iter().collect()
            } else {
                return Err(errors::argument(
                    py,
                    format!("{}: expected a tuple of {} values (or None)", what(name), ts.len()),
                ));
            };
            if items.len() != ts.len() {
                return Err(errors::argument(
                    py,
                    format!(
                        "{}: expected a tuple of {} values (or None), got {} values",
                        what(name),
                        ts.len(),
                        items.len()
                    ),
                ));
            }
            for (k, (item, t)) in items.iter().zip(ts).enumerate() {
                flatten_optional(item, t, what, &format!("{name}.{k}"), out)?;
            }
            Ok(())
        }
        leaf => {
            let (elem, rank) = leaf_of(leaf);
            if elem != Scalar::F64 {
                return Err(errors::argument(
                    py,
                    format!("{}: must be None, `{name}` ({leaf}) has no f64 elements", what(name)),
                ));
            }
            let held = if rank == 0 {
                convert::scalar(obj, Scalar::F64, &|| what(name))?
            } else {
                convert::array(obj, Scalar::F64, rank, &|| what(name))?
            };
            out.push(Some(held));
            Ok(())
        }
    }
}

fn args_of<'a>(leaves: &'a [Leaf<'_>]) -> Vec<Arg<'a>> {
    leaves.iter().map(Leaf::arg).collect()
}

fn optional_args_of<'a>(leaves: &'a [Option<Leaf<'_>>]) -> Vec<Option<Arg<'a>>> {
    leaves.iter().map(|l| l.as_ref().map(Leaf::arg)).collect()
}

/// A dense matrix (row-major `data`) as a 2-D numpy array, with its rows
/// and columns reordered by `rows`/`cols` (for each new index its old one).
fn matrix<'py>(
    py: Python<'py>,
    rows: usize,
    cols: usize,
    data: Vec<f64>,
    row_order: Option<&[usize]>,
    col_order: Option<&[usize]>,
) -> PyResult<Bound<'py, PyAny>> {
    let data = if row_order.is_none() && col_order.is_none() {
        data
    } else {
        let mut out = Vec::with_capacity(rows * cols);
        for r in 0..rows {
            let old_r = row_order.map_or(r, |o| o[r]);
            for c in 0..cols {
                out.push(data[old_r * cols + col_order.map_or(c, |o| o[c])]);
            }
        }
        out
    };
    let a = Array2::from_shape_vec((rows, cols), data)
        .map_err(|e| errors::internal(py, format!("a Jacobian of the wrong size: {e}")))?;
    Ok(a.into_pyarray(py).into_any())
}

#[pymethods]
impl Function {
    /// The value of the function: ``f(*args, **kwargs)``.
    ///
    /// A result of one leaf is that leaf (f64 -> float, i64 -> int, bool ->
    /// bool, array -> numpy array of the result's shape); a tuple result is a
    /// Python tuple of them.
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guarded(py, || {
            let leaves = self.bind(py, args, kwargs)?;
            let argv = args_of(&leaves);
            let f = &self.f;
            let out = py.detach(|| f.call(&argv)).map_err(|e| to_py(py, e))?;
            self.result_to_py(py, out)
        })
    }

    /// The gradient of a function whose result is one f64:
    /// ``f.grad(*args, wrt=None)``.
    ///
    /// Returns the gradient with respect to the parameter ``wrt`` names (a
    /// name or a position), shaped like it (a float for an f64, an array of
    /// the same shape for an array, a tuple for a tuple parameter); for a
    /// tuple or list ``wrt``, a tuple of those in that order. Without
    /// ``wrt``: the module's active parameters (every parameter with f64
    /// parts unless ``compile(..., wrt=...)`` chose), the gradient itself
    /// when there is one, else a tuple in parameter order.
    #[pyo3(signature = (*args, wrt = None, **kwargs))]
    fn grad<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        wrt: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guarded(py, || {
            let w = self.wrt(py, wrt)?;
            let leaves = self.bind(py, args, kwargs)?;
            let argv = args_of(&leaves);
            let h = &w.handle;
            let g = py.detach(|| h.grad(&argv)).map_err(|e| to_py(py, e))?;
            self.per_param(py, &w, g.gradient.into_vec())
        })
    }

    /// ``(value, gradient)`` in one call: the value as a float and the
    /// gradient as :meth:`grad` returns it.
    #[pyo3(signature = (*args, wrt = None, **kwargs))]
    fn value_and_grad<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        wrt: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        guarded(py, || {
            let w = self.wrt(py, wrt)?;
            let leaves = self.bind(py, args, kwargs)?;
            let argv = args_of(&leaves);
            let h = &w.handle;
            let g = py.detach(|| h.grad(&argv)).map_err(|e| to_py(py, e))?;
            let grads = self.per_param(py, &w, g.gradient.into_vec())?;
            PyTuple::new(py, [pyo3::types::PyFloat::new(py, g.value).into_any(), grads])
        })
    }

    /// Reverse mode: ``f.vjp(primals, cotangent, wrt=None)`` returns
    /// ``(value, cotangents)``.
    ///
    /// ``primals`` is a tuple with one argument per parameter; ``cotangent``
    /// is shaped like the result (a float, an array of the result's shape,
    /// a tuple for a tuple result; ``None`` anywhere for zero, and for the
    /// i64 and bool parts). ``cotangents`` are the parameters' cotangents,
    /// returned as :meth:`grad` returns gradients.
    #[pyo3(signature = (primals, cotangent, wrt = None))]
    fn vjp<'py>(
        &self,
        py: Python<'py>,
        primals: &Bound<'py, PyAny>,
        cotangent: &Bound<'py, PyAny>,
        wrt: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        guarded(py, || {
            let w = self.wrt(py, wrt)?;
            let leaves = self.bind_primals(py, primals)?;
            let cts = self.bind_cotangent(cotangent)?;
            let (argv, ctv) = (args_of(&leaves), optional_args_of(&cts));
            let h = &w.handle;
            let r = py.detach(|| h.vjp(&argv, &ctv)).map_err(|e| to_py(py, e))?;
            let value = self.result_to_py(py, r.value)?;
            let cotangents = self.per_param(py, &w, r.cotangent.into_vec())?;
            PyTuple::new(py, [value, cotangents])
        })
    }

    /// Forward mode: ``f.jvp(primals, tangents, wrt=None)`` returns
    /// ``(value, tangent)``, as ``jax.jvp``.
    ///
    /// ``primals`` and ``tangents`` are tuples with one entry per parameter;
    /// a tangent is shaped like its parameter (f64 parts only: ``None`` for
    /// zero, and for parameters or parts that are not differentiated). The
    /// tangent out is shaped like the result (``None`` for i64 and bool
    /// parts).
    #[pyo3(signature = (primals, tangents, wrt = None))]
    fn jvp<'py>(
        &self,
        py: Python<'py>,
        primals: &Bound<'py, PyAny>,
        tangents: &Bound<'py, PyAny>,
        wrt: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        guarded(py, || {
            let w = self.wrt(py, wrt)?;
            let leaves = self.bind_primals(py, primals)?;
            let ts = self.bind_tangents(py, tangents)?;
            let (argv, tv) = (args_of(&leaves), optional_args_of(&ts));
            let h = &w.handle;
            let r = py.detach(|| h.jvp(&argv, &tv)).map_err(|e| to_py(py, e))?;
            let value = self.result_to_py(py, r.value)?;
            let tangent = structure(py, &self.result, &mut r.tangent.into_iter())?;
            PyTuple::new(py, [value, tangent])
        })
    }

    /// Forward mode in many directions: ``f.jvp_many(primals, directions,
    /// wrt=None)`` returns ``(value, tangents)``, ``tangents`` a list with
    /// the tangent of each direction (each as :meth:`jvp`'s).
    ///
    /// ``directions`` is a sequence of tangents, each as the ``tangents`` of
    /// :meth:`jvp`. One pass computes the primal once and several directions
    /// side by side (vector forward mode: when the active parameters'
    /// extents are literals, one per Jacobian column up to 32, more columns
    /// split evenly over the fewest passes of at most 32; else eight; one direction per pass when the
    /// only active parameter is one scalar, or the function runs
    /// ``grad``/``vjp`` inside); each tangent is bitwise what :meth:`jvp`
    /// returns for its direction.
    #[pyo3(signature = (primals, directions, wrt = None))]
    fn jvp_many<'py>(
        &self,
        py: Python<'py>,
        primals: &Bound<'py, PyAny>,
        directions: &Bound<'py, PyAny>,
        wrt: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        guarded(py, || {
            let w = self.wrt(py, wrt)?;
            let leaves = self.bind_primals(py, primals)?;
            let mut bound = Vec::new();
            for d in directions.try_iter()? {
                bound.push(self.bind_tangents(py, &d?)?);
            }
            let argv = args_of(&leaves);
            let dirs: Vec<Vec<Option<Arg<'_>>>> = bound.iter().map(|ts| optional_args_of(ts)).collect();
            let h = &w.handle;
            let r = py.detach(|| h.jvp_many(&argv, &dirs)).map_err(|e| to_py(py, e))?;
            let value = self.result_to_py(py, r.value)?;
            let tangents = r
                .tangents
                .into_iter()
                .map(|t| structure(py, &self.result, &mut t.into_iter()))
                .collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, [value, PyList::new(py, tangents)?.into_any()])
        })
    }

    /// The dense Jacobian: ``f.jacobian(*args, wrt=None)``, a 2-D float64
    /// array of shape ``(m, n)``.
    ///
    /// Rows: the f64 elements of the result (tuple components left to
    /// right, arrays row-major). Columns: the f64 elements of the ``wrt``
    /// parameters in the order of ``wrt`` (default: the active parameters
    /// in parameter order), flattened likewise. Reverse mode (one backward
    /// pass per row) when ``m <= n``, else forward mode (several columns
    /// per pass, as :meth:`jvp_many`).
    #[pyo3(signature = (*args, wrt = None, **kwargs))]
    fn jacobian<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        wrt: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guarded(py, || {
            let w = self.wrt(py, wrt)?;
            let leaves = self.bind(py, args, kwargs)?;
            let argv = args_of(&leaves);
            let h = &w.handle;
            let j = py.detach(|| h.jacobian(&argv)).map_err(|e| to_py(py, e))?;
            let order = self.column_order(&w, &leaves);
            matrix(py, j.rows, j.cols, j.data, None, order.as_deref())
        })
    }

    /// The Hessian-vector product ``H t`` of a function whose result is one
    /// f64: ``f.hvp(primals, tangents, wrt=None)`` (forward over reverse).
    ///
    /// ``primals`` and ``tangents`` as for :meth:`jvp`; returns ``H t``
    /// shaped as :meth:`grad` returns gradients.
    #[pyo3(signature = (primals, tangents, wrt = None))]
    fn hvp<'py>(
        &self,
        py: Python<'py>,
        primals: &Bound<'py, PyAny>,
        tangents: &Bound<'py, PyAny>,
        wrt: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guarded(py, || {
            let w = self.wrt(py, wrt)?;
            let leaves = self.bind_primals(py, primals)?;
            let ts = self.bind_tangents(py, tangents)?;
            let (argv, tv) = (args_of(&leaves), optional_args_of(&ts));
            let h = &w.handle;
            let r = py.detach(|| h.hvp(&argv, &tv)).map_err(|e| to_py(py, e))?;
            self.per_param(py, &w, r.hvp.into_vec())
        })
    }

    /// The dense Hessian of a function whose result is one f64:
    /// ``f.hessian(*args, wrt=None)``, a square 2-D float64 array whose rows
    /// and columns are the f64 elements of the ``wrt`` parameters (ordered
    /// as the Jacobian's columns); one Hessian-vector product per column.
    #[pyo3(signature = (*args, wrt = None, **kwargs))]
    fn hessian<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        wrt: Option<&Bound<'py, PyAny>>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        guarded(py, || {
            let w = self.wrt(py, wrt)?;
            let leaves = self.bind(py, args, kwargs)?;
            let argv = args_of(&leaves);
            let h = &w.handle;
            let j = py.detach(|| h.hessian(&argv)).map_err(|e| to_py(py, e))?;
            let order = self.column_order(&w, &leaves);
            matrix(py, j.rows, j.cols, j.data, order.as_deref(), order.as_deref())
        })
    }

    /// The definition's name.
    #[getter(name)]
    fn py_name(&self) -> &str {
        self.name()
    }

    /// The parameter names, in order.
    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.params.iter().map(|p| p.name.as_str()))
    }

    /// The source signature, ``def f(x: [n]f64, w: [n]f64) -> f64``.
    #[getter]
    fn signature(&self) -> String {
        self.signature_text()
    }

    /// The parameters differentiated when no ``wrt`` is given.
    #[getter]
    fn default_wrt<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.default_wrt.iter().map(|&k| self.params[k].name.as_str()))
    }

    /// The loops that checkpointing (``compile(..., checkpoint=True)``)
    /// leaves taped, as ``FILE:LINE:COL: warning: ...`` strings: while
    /// loops, loops without a primal state, loops with ``i64`` or ``bool``
    /// array states. Empty without checkpointing.
    fn checkpoint_warnings(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let f = &self.f;
        let warnings = py.detach(|| f.checkpoint_warnings()).map_err(|e| to_py(py, e))?;
        Ok(warnings.iter().map(ToString::to_string).collect())
    }

    /// The backend's code of `kind` (``"primal"``, ``"jvp"``, ``"vjp"``,
    /// ``"vjp_rows"``, ``"jvp_lanes"`` or ``"hvp"``) as text: Cranelift IR,
    /// or optimised LLVM IR; `None` on the interpreter. Compiles the code
    /// again with its text kept (about the cost of a compilation).
    /// `UsageError` for another kind.
    fn backend_ir(&self, py: Python<'_>, kind: &str) -> PyResult<Option<String>> {
        guarded(py, || {
            let f = &self.f;
            py.detach(|| f.backend_ir(kind)).map_err(|e| to_py(py, e))
        })
    }

    fn __repr__(&self) -> String {
        format!("<arrayad.Function {}>", self.signature_text())
    }
}
