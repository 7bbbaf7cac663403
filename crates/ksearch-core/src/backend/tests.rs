use super::*;

#[test]
fn every_kind_is_its_own_backend_and_parses_back_from_its_name() {
    for kind in BackendKind::ALL {
        let b = kind.backend();
        assert_eq!(b.kind(), kind);
        assert_eq!(kind.name(), b.name());
        assert_eq!(kind.name().parse::<BackendKind>(), Ok(kind));
        assert_eq!(kind.to_string(), b.name());
        assert!(!b.targets().is_empty(), "{kind} runs nowhere");
        assert!(!b.candidate().fences.is_empty(), "{kind} has no fence");
    }
}

#[test]
fn every_kind_the_type_has_is_in_all() {
    // The kinds as the type itself lists them (its JSON schema, derived from the enum), against
    // the list every "for each backend" walks: a kind added to one and not the other fails here.
    fn names(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("enum", serde_json::Value::Array(xs)) => {
                            out.extend(xs.iter().filter_map(|x| x.as_str().map(str::to_owned)));
                        }
                        ("const", serde_json::Value::String(x)) => out.push(x.clone()),
                        _ => names(v, out),
                    }
                }
            }
            serde_json::Value::Array(xs) => xs.iter().for_each(|x| names(x, out)),
            _ => {}
        }
    }
    let schema = serde_json::to_value(schemars::schema_for!(BackendKind)).unwrap();
    let mut from_type = Vec::new();
    names(&schema, &mut from_type);
    from_type.sort();
    let mut listed: Vec<String> = BackendKind::ALL.map(|k| k.name().to_owned()).to_vec();
    listed.sort();
    assert_eq!(from_type, listed, "{schema}");
}

#[test]
fn names_match_the_task_format() {
    for kind in BackendKind::ALL {
        let json = serde_json::to_string(&kind).unwrap();
        assert_eq!(json, format!("\"{}\"", kind.name()));
    }
}

#[test]
fn an_unknown_name_lists_the_backends() {
    let err = "cuda".parse::<BackendKind>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown backend `cuda` (expected one of: c, mlx, torch)"
    );
    assert!("C".parse::<BackendKind>().is_err(), "names are exact");
}

#[test]
fn a_run_targets_the_named_target_then_the_device_then_the_default() {
    let mlx = BackendKind::Mlx.backend();
    assert_eq!(mlx.target_for(Some("metal"), None), Target::Metal);
    assert_eq!(
        mlx.target_for(Some("cuda"), Some(Target::Metal)),
        Target::Cuda
    );
    // The test suite's targets are not GPUs: the device decides, else CUDA.
    assert_eq!(mlx.target_for(Some("numpy"), None), Target::Cuda);
    assert_eq!(
        mlx.target_for(Some("cpu"), Some(Target::Metal)),
        Target::Metal
    );
    assert_eq!(mlx.target_for(None, Some(Target::Cpu)), Target::Cuda);
    // Aliases are for people typing `knowledge` commands, not for a run's target.
    assert_eq!(mlx.target_for(Some("apple"), None), Target::Cuda);
    let c = BackendKind::C.backend();
    assert_eq!(c.target_for(Some("metal"), Some(Target::Cuda)), Target::Cpu);
}

#[test]
fn the_c_backend_takes_exactly_the_dtypes_c_can_spell() {
    for d in Dtype::ALL {
        assert_eq!(
            BackendKind::C.backend().supports_dtype(d),
            d.c_type().is_some(),
            "{d}"
        );
        assert!(BackendKind::Mlx.backend().supports_dtype(d), "{d}");
        assert!(BackendKind::Torch.backend().supports_dtype(d), "{d}");
    }
}

#[test]
fn space_templates_see_c_or_the_device_target() {
    let c = BackendKind::C.backend();
    assert_eq!(c.space_target(Some(Target::Cuda)), "c");
    let mlx = BackendKind::Mlx.backend();
    assert_eq!(mlx.space_target(Some(Target::Metal)), "metal");
    assert_eq!(mlx.space_target(None), "any");
}

#[test]
fn torch_runs_on_cuda_by_default_and_on_the_cpu_for_tests() {
    let torch = BackendKind::Torch.backend();
    assert_eq!(torch.target_for(None, None), Target::Cuda);
    assert_eq!(torch.target_for(Some("cpu"), None), Target::Cpu);
    assert_eq!(torch.target_for(None, Some(Target::Metal)), Target::Cuda);
    assert_eq!(torch.space_target(None), "cuda");
    assert_eq!(torch.language(), Language::Cuda);
}
