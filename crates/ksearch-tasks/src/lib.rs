//! Finding and loading tasks: a directory holding `task.toml`, or a built-in name such as
//! `cpu/softmax` from the catalog embedded at build time.

mod load;

pub use load::{
    LoadError, builtin_names, builtin_task_toml, load_builtin, load_dir, load_task, read_candidate,
};
