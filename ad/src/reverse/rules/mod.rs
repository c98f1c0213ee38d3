//! The reverse-mode rule of each structured construct, one module per
//! construct (as Futhark's `Rev.hs` dispatches to `Rev/Loop.hs`, ...).

mod branch;
mod build;
mod call;
mod loops;
mod update;
