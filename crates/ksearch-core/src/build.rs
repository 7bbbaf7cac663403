//! `[build]` of a `c` task: how its sources are built beyond the contract's flags — C++ instead
//! of C, extra compiler flags for candidates and the implementations timed beside them, extra
//! libraries to link.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::location::FieldPath;
use crate::task::{BackendKind, TaskSpec};

/// `[build]` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildSpec {
    /// The task's sources (reference, seed, baseline, candidates) are C++, built by `$CXX`
    /// (else `c++`) with the candidate function given C linkage by the shim.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cxx: bool,
    /// Added to the compile of candidates, parents, baselines and comparisons (never the
    /// reference's, which stays conservative), after the contract's own flags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cflags: Vec<String>,
    /// Linked into every build (`-l<name>`), reference included.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libs: Vec<String>,
}

/// Whether `lib` can follow `-l`.
pub(crate) fn is_library_name(lib: &str) -> bool {
    !lib.is_empty()
        && lib
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.+".contains(c))
}

/// `[build]` fits the task: only a native backend (c) builds, flags are single flags that leave
/// the output and the shared object alone, libraries are library names.
pub(crate) fn validate(spec: &TaskSpec, root: &FieldPath) -> Result<(), (FieldPath, String)> {
    let Some(build) = &spec.build else {
        return Ok(());
    };
    let path = root.key("build");
    if !spec.backend.backend().native() {
        return Err((
            path,
            format!(
                "only a backend of native code ({}) builds its sources; this task's backend is `{}`",
                BackendKind::ALL
                    .into_iter()
                    .filter(|k| k.backend().native())
                    .map(BackendKind::name)
                    .collect::<Vec<_>>()
                    .join(", "),
                spec.backend
            ),
        ));
    }
    for (i, flag) in build.cflags.iter().enumerate() {
        let at = path.key("cflags").index(i);
        if !flag.starts_with('-') || flag.chars().any(char::is_whitespace) {
            return Err((
                at,
                format!("`{flag}` is not one compiler flag (one `-…` word per entry)"),
            ));
        }
        if flag == "-o" || flag.starts_with("-o") && !flag.starts_with("-O") || flag == "-c" {
            return Err((
                at,
                format!("`{flag}` would change what is built; ksearch names the output itself"),
            ));
        }
    }
    for (i, lib) in build.libs.iter().enumerate() {
        if !is_library_name(lib) {
            return Err((
                path.key("libs").index(i),
                format!("`{lib}` is not a library name (as in `-l<name>`)"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::parse_task;

    const TASK: &str = include_str!("../../../tasks/cpu/softmax/task.toml");

    #[test]
    fn a_build_table_parses_round_trips_and_is_checked_by_field() {
        let text = format!(
            "{TASK}\n[build]\ncxx = true\ncflags = [\"-ffast-math\", \"-funroll-loops\"]\nlibs = [\"m\"]\n"
        );
        let spec = parse_task(&text, "t/task.toml").unwrap();
        let build = spec.build.as_ref().unwrap();
        assert!(build.cxx);
        assert_eq!(build.cflags, ["-ffast-math", "-funroll-loops"]);
        let written = toml::to_string(&spec).unwrap();
        assert_eq!(parse_task(&written, "round-trip").unwrap(), spec);

        for (table, field, why) in [
            (
                "cflags = [\"-o evil.so\"]",
                "build.cflags[0]",
                "one compiler flag",
            ),
            (
                "cflags = [\"-oevil\"]",
                "build.cflags[0]",
                "names the output itself",
            ),
            ("cflags = [\"O3\"]", "build.cflags[0]", "one compiler flag"),
            ("libs = [\"m -lx\"]", "build.libs[0]", "not a library name"),
            ("cc = \"clang\"", "build.cc", "unknown field"),
        ] {
            let e = parse_task(&format!("{TASK}\n[build]\n{table}\n"), "t/task.toml")
                .expect_err(table)
                .to_string();
            assert!(
                e.contains(&format!("field `{field}`")) && e.contains(why),
                "{table}: {e}"
            );
        }
        let mlx = TASK.replace("backend = \"c\"", "backend = \"mlx\"");
        let e = parse_task(
            &format!("{mlx}\n[build]\ncflags = [\"-O2\"]\n"),
            "t/task.toml",
        );
        assert!(
            e.is_err_and(|e| e
                .to_string()
                .contains("only a backend of native code (c) builds")),
            "an mlx task has nothing to build"
        );
    }
}
