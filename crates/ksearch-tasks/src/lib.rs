//! Finding and loading tasks: a directory holding `task.toml`, or a built-in name such as
//! `cpu/softmax` from the catalog embedded at build time.

mod files;
pub mod import;
mod load;

pub use files::{MAX_SOURCE_BYTES, MAX_TOML_BYTES, ReadError, read_text};

pub use load::{
    LoadError, builtin_names, builtin_task_toml, load_builtin, load_dir, load_task, read_candidate,
    shadows_builtin,
};
