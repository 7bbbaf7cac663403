//! Which CPUs and which GPU each local slot gets.

use std::process::Command;

/// What one local slot runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotPlan {
    pub slot: usize,
    /// The CPUs its judge and runners may use (the slot thread's affinity, which every process
    /// it starts inherits); empty: no restriction.
    pub cpus: Vec<usize>,
    /// Set in its judge's environment (`CUDA_VISIBLE_DEVICES` for a GPU task).
    pub env: Vec<(String, String)>,
    /// In words: `cpu 1`, `cuda device 0, cpus 0-7`.
    pub place: String,
}

/// The CPUs this thread may run on (Linux; elsewhere none are known).
pub(crate) fn allowed_cpus() -> Vec<usize> {
    affinity(0)
}

/// The CPUs this process may run on: its main thread's, whichever thread asks (an evaluation
/// slot's thread is pinned to its own).
pub(crate) fn process_cpus() -> Vec<usize> {
    // SAFETY: getpid has no preconditions.
    affinity(unsafe { libc::getpid() })
}

fn affinity(pid: libc::pid_t) -> Vec<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: an affinity into a local set of the size given.
        let r = unsafe {
            libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &raw mut set)
        };
        if r != 0 {
            return Vec::new();
        }
        // SAFETY: CPU_ISSET reads the set within its bounds.
        (0..1024)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        Vec::new()
    }
}

/// `0`, `0-3`, `0,2,5`.
fn cpu_words(cpus: &[usize]) -> String {
    match cpus {
        [] => "any cpu".into(),
        [one] => format!("cpu {one}"),
        [first, .., last] if last - first + 1 == cpus.len() => format!("cpus {first}-{last}"),
        _ => format!(
            "cpus {}",
            cpus.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

/// `cpus` split into `jobs` groups of consecutive CPUs, as even as can be. With fewer CPUs
/// than jobs, slots share them round-robin (one CPU each).
pub(crate) fn split_cpus(cpus: &[usize], jobs: usize) -> Vec<Vec<usize>> {
    let n = cpus.len();
    if jobs <= 1 || n == 0 {
        // One slot: no restriction, as a single evaluation has always run.
        return vec![Vec::new(); jobs.max(1)];
    }
    if n < jobs {
        return (0..jobs).map(|i| vec![cpus[i % n]]).collect();
    }
    (0..jobs)
        .map(|i| cpus[i * n / jobs..(i + 1) * n / jobs].to_vec())
        .collect()
}

/// The GPUs this process may use, as `CUDA_VISIBLE_DEVICES` names them: its value where it is
/// set, else every GPU `nvidia-smi` lists; none where neither says.
pub fn visible_gpus() -> Vec<String> {
    if let Ok(v) = std::env::var("CUDA_VISIBLE_DEVICES") {
        return v
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty() && !d.starts_with('-'))
            .map(str::to_owned)
            .collect();
    }
    let Ok(out) = Command::new("nvidia-smi")
        .args(["--query-gpu=index", "--format=csv,noheader"])
        .output()
    else {
        return Vec::new();
    };
    if !out.status.success() {
        return Vec::new();
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The slots of `jobs` evaluations at once on this machine. For a GPU task, each slot has a
/// GPU of its own, so there are at most as many slots as GPUs (one, unpinned, where none is
/// seen); in every case the CPUs are split between the slots, so that judges running side by
/// side do not time each other's work.
pub fn local_slots(jobs: usize, gpu: bool) -> Vec<SlotPlan> {
    let mut jobs = jobs.max(1);
    let gpus = if gpu && jobs > 1 {
        let gpus = visible_gpus();
        jobs = jobs.min(gpus.len()).max(1);
        if jobs == 1 { Vec::new() } else { gpus }
    } else {
        Vec::new()
    };
    split_cpus(&allowed_cpus(), jobs)
        .into_iter()
        .enumerate()
        .map(|(slot, cpus)| {
            let mut place = cpu_words(&cpus);
            let mut env = Vec::new();
            if let Some(gpu) = gpus.get(slot) {
                env.push(("CUDA_VISIBLE_DEVICES".to_owned(), gpu.clone()));
                place = format!("cuda device {gpu}, {place}");
            }
            SlotPlan {
                slot,
                cpus,
                env,
                place,
            }
        })
        .collect()
}

/// Why `plans` run fewer evaluations at once than `jobs` asked, or slower ones, in words.
pub fn slots_note(jobs: usize, plans: &[SlotPlan]) -> Option<String> {
    if plans.len() < jobs {
        return Some(format!(
            "--jobs {jobs}: this machine shows {} GPU(s) ({}), and each evaluation of a GPU task has one of its own, so {} run at once",
            visible_gpus().len(),
            match visible_gpus() {
                g if g.is_empty() =>
                    "no CUDA_VISIBLE_DEVICES, and nvidia-smi lists none".to_owned(),
                g => g.join(", "),
            },
            plans.len()
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    let shared = plans.iter().flat_map(|p| &p.cpus).any(|c| !seen.insert(*c));
    shared.then(|| {
        format!(
            "--jobs {jobs}: this process may use {} CPU(s), fewer than the slots, which share them: their timings disturb each other",
            allowed_cpus().len()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_are_split_into_groups_of_their_own() {
        assert_eq!(split_cpus(&[0, 1], 2), vec![vec![0], vec![1]]);
        assert_eq!(
            split_cpus(&[0, 1, 2, 3, 4], 2),
            vec![vec![0, 1], vec![2, 3, 4]]
        );
        // One slot keeps every CPU, as a single evaluation always had.
        assert_eq!(split_cpus(&[0, 1, 2, 3], 1), vec![Vec::<usize>::new()]);
        // Fewer CPUs than slots: shared, one each.
        assert_eq!(split_cpus(&[3], 2), vec![vec![3], vec![3]]);
        assert_eq!(cpu_words(&[2, 3, 4]), "cpus 2-4");
        assert_eq!(cpu_words(&[0, 2]), "cpus 0,2");
        assert_eq!(cpu_words(&[1]), "cpu 1");
    }

    #[test]
    fn a_cpu_task_gets_a_slot_per_job_without_gpus() {
        let slots = local_slots(2, false);
        assert_eq!(slots.len(), 2);
        assert!(slots.iter().all(|s| s.env.is_empty()));
        if allowed_cpus().len() >= 2 {
            assert!(slots[0].cpus.iter().all(|c| !slots[1].cpus.contains(c)));
            assert_eq!(slots_note(2, &slots), None);
        }
        let many = local_slots(allowed_cpus().len() + 1, false);
        assert!(slots_note(many.len(), &many).is_some_and(|n| n.contains("share")));
    }
}
