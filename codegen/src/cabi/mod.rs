//! The C ABI of shared libraries (LANGUAGE.md section 8): the interface of
//! each export (`abi.rs`), the header (`header.rs`), the generated tables
//! and wrappers (`wrappers.rs`) and the link step (`link.rs`), which takes
//! object code from either backend.

pub(crate) mod abi;
pub(crate) mod header;
pub(crate) mod link;
pub(crate) mod wrappers;
