//! `[slurm]`: how `--executor slurm` submits its jobs (`docs/scale.md`).

use std::path::PathBuf;
use std::time::Duration;

use ksearch_core::location::FieldPath;
use serde::Deserialize;

/// The longest `poll_s` (a minute): the run hears of a finished job this late at most.
const MAX_POLL_S: f64 = 60.0;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SlurmDefaults {
    /// `--partition`.
    pub(crate) partition: Option<String>,
    /// `--account`.
    pub(crate) account: Option<String>,
    /// `--time`, in Slurm's words (`30`, `2:00:00`); default: the evaluation's limit plus 5
    /// minutes.
    pub(crate) time_limit: Option<String>,
    /// `--cpus-per-task` of each job.
    pub(crate) cpus_per_job: Option<u32>,
    /// `--gres` of a GPU task's jobs (default `gpu:1`).
    pub(crate) gres: Option<String>,
    /// More `sbatch` options, e.g. `["--qos=short", "--constraint=h100"]`.
    pub(crate) extra_args: Option<Vec<String>>,
    /// The ksearch binary as the nodes see it (default: this one's path, which they must see).
    pub(crate) ksearch: Option<PathBuf>,
    /// A directory every node sees at the same path, for the jobs' files (default: the run
    /// directory's `slurm/`).
    pub(crate) work_dir: Option<PathBuf>,
    /// Seconds between two looks at the queue (default 1).
    pub(crate) poll_s: Option<f64>,
}

impl SlurmDefaults {
    /// `self`'s values, falling back to `under`'s, field by field.
    pub(crate) fn over(self, under: SlurmDefaults) -> SlurmDefaults {
        SlurmDefaults {
            partition: self.partition.or(under.partition),
            account: self.account.or(under.account),
            time_limit: self.time_limit.or(under.time_limit),
            cpus_per_job: self.cpus_per_job.or(under.cpus_per_job),
            gres: self.gres.or(under.gres),
            extra_args: self.extra_args.or(under.extra_args),
            ksearch: self.ksearch.or(under.ksearch),
            work_dir: self.work_dir.or(under.work_dir),
            poll_s: self.poll_s.or(under.poll_s),
        }
    }

    /// Every value usable: the field at fault and why.
    pub(crate) fn check(&self, path: &FieldPath) -> Result<(), (FieldPath, String)> {
        if let Some(p) = self.poll_s {
            ksearch_engine::check_range("", p, 0.0, true, MAX_POLL_S, "seconds").map_err(|e| {
                (
                    path.key("poll_s"),
                    format!("it is {p}; it must be {}", e.allowed),
                )
            })?;
        }
        if self.cpus_per_job == Some(0) {
            return Err((path.key("cpus_per_job"), "it must be at least 1".into()));
        }
        for (key, dir) in [("ksearch", &self.ksearch), ("work_dir", &self.work_dir)] {
            if dir.as_ref().is_some_and(|d| !d.is_absolute()) {
                return Err((
                    path.key(key),
                    "it must be an absolute path (the nodes resolve it, not this directory)".into(),
                ));
            }
        }
        Ok(())
    }

    /// The executor's settings.
    pub(crate) fn settings(&self) -> ksearch_eval::executor::SlurmSettings {
        ksearch_eval::executor::SlurmSettings {
            partition: self.partition.clone(),
            account: self.account.clone(),
            time_limit: self.time_limit.clone(),
            cpus_per_job: self.cpus_per_job,
            gres: self.gres.clone(),
            extra_args: self.extra_args.clone().unwrap_or_default(),
            ksearch: self.ksearch.clone(),
            poll_interval: Duration::from_secs_f64(self.poll_s.unwrap_or(1.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::KsearchToml;

    #[test]
    fn the_slurm_table_is_read_and_checked_where_the_file_says_it() {
        let text = "[slurm]\npartition = \"gpu\"\ncpus_per_job = 2\nextra_args = [\"--qos=short\"]\nwork_dir = \"/shared/jobs\"\npoll_s = 0.5\n";
        let c = KsearchToml::parse(text, "ksearch.toml").unwrap();
        let s = c.slurm.settings();
        assert_eq!(s.partition.as_deref(), Some("gpu"));
        assert_eq!(s.cpus_per_job, Some(2));
        assert_eq!(s.extra_args, ["--qos=short"]);
        assert_eq!(s.poll_interval.as_millis(), 500);
        assert_eq!(
            c.slurm.work_dir.as_deref(),
            Some(std::path::Path::new("/shared/jobs"))
        );
        for (bad, field) in [
            ("poll_s = 0", "slurm.poll_s"),
            ("poll_s = nan", "slurm.poll_s"),
            ("cpus_per_job = 0", "slurm.cpus_per_job"),
            ("work_dir = \"jobs\"", "slurm.work_dir"),
            ("ksearch = \"bin/ksearch\"", "slurm.ksearch"),
            ("partiton = \"gpu\"", "slurm.partiton"),
        ] {
            let e = KsearchToml::parse(&format!("[slurm]\n{bad}\n"), "ksearch.toml").unwrap_err();
            assert_eq!(e.field, field, "{bad}: {e}");
            assert_eq!(e.location.map(|l| l.line), Some(2), "{bad}: {e}");
        }
        // The project's values over the user's, field by field.
        let project = KsearchToml::parse("[slurm]\naccount = \"a\"\n", "p").unwrap();
        let user =
            KsearchToml::parse("[slurm]\npartition = \"p\"\naccount = \"b\"\n", "u").unwrap();
        let merged = project.over(user).slurm;
        assert_eq!(
            (merged.partition.as_deref(), merged.account.as_deref()),
            (Some("p"), Some("a"))
        );
    }
}
