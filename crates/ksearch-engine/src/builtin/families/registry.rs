//! The families the builtin proposer knows, and the one for a task.

use ksearch_core::task::TaskSpec;

use super::{Family, linear_recurrence, matmul, softmax};

/// Every family the builtin proposer knows.
pub fn all() -> Vec<Box<dyn Family>> {
    vec![
        Box::new(softmax::Softmax::new()),
        Box::new(matmul::Matmul::new()),
        Box::new(linear_recurrence::LinearRecurrence::new()),
    ]
}

/// The family whose task this is, if any.
pub fn for_task(spec: &TaskSpec) -> Option<Box<dyn Family>> {
    all().into_iter().find(|f| f.matches(spec))
}

#[cfg(test)]
mod pattern_tests {
    #[test]
    fn every_pattern_a_knob_names_is_in_the_knowledge_base() {
        let k = ksearch_knowledge::Knowledge::builtin().unwrap();
        for family in super::all() {
            for knob in family.knobs() {
                if let Some(id) = &knob.pattern {
                    assert!(
                        k.pattern(id).is_some(),
                        "{}.{} names unknown pattern {id}",
                        family.name(),
                        knob.name
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use ksearch_core::Dtype;

    use super::super::in_space;
    use super::*;

    fn spec(text: &str, file: &str) -> TaskSpec {
        ksearch_core::task::parse_task(text, file).expect("task parses")
    }

    #[test]
    fn for_task_finds_each_builtin_task() {
        let cases = [
            (
                include_str!("../../../../../tasks/cpu/softmax/task.toml"),
                "softmax",
            ),
            (
                include_str!("../../../../../tasks/cpu/matmul/task.toml"),
                "matmul",
            ),
            (
                include_str!("../../../../../tasks/cpu/linear_recurrence/task.toml"),
                "linear_recurrence",
            ),
        ];
        for (text, name) in cases {
            let s = spec(text, name);
            let f = for_task(&s).unwrap_or_else(|| panic!("no family for {name}"));
            assert_eq!(f.name(), name);
        }
    }

    #[test]
    fn for_task_rejects_other_tasks() {
        let mut s = ksearch_core::task::tests_support::matmul_spec();
        s.name = "gemm".into();
        assert!(for_task(&s).is_none());
        let mut s = ksearch_core::task::tests_support::matmul_spec();
        s.inputs[0].dtype = Dtype::F64;
        assert!(for_task(&s).is_none());
    }

    #[test]
    fn every_family_seed_is_valid_and_in_space() {
        for f in all() {
            let seed = f.seed();
            assert!(in_space(f.knobs(), &seed), "{}", f.name());
            assert!(f.valid(&seed), "{}", f.name());
            for k in f.knobs() {
                assert!((1..=5).contains(&k.difficulty), "{}", k.name);
                assert!(k.values.len() >= 2, "{}", k.name);
            }
        }
    }
}
