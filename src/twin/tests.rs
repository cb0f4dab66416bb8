//! Tests of the twin's own steps before and around the API writes: the relabels checked
//! against the source before anything starts, and the label patch.

use std::collections::BTreeMap;

use super::*;
use crate::twin::load::label_patch;
use gpuwl_core::analysis::twin::report::Relabel;
use gpuwl_core::model::operator::PolicyStatus;

#[test]
fn relabels_are_checked_against_the_source_before_anything_starts() {
    let mut gpu = NodeInfo::named("lab-node-1");
    gpu.capacity
        .insert("nvidia.com/GA102GL_A10".into(), "2".into());
    gpu.allocatable = Some(gpu.capacity.clone());
    let source = Snapshot {
        origin: "files".into(),
        ..Snapshot::of_cluster(
            vec![gpu, NodeInfo::named("cpu-1")],
            vec![],
            PolicyStatus::not_read(),
        )
    };
    let relabel = |s: &str| -> Relabel { s.parse().unwrap() };
    let hw = relabelled_hardware(&source, &[relabel("lab-node-1=container")]).unwrap();
    assert_eq!(hw.keys().collect::<Vec<_>>(), ["lab-node-1"]);
    assert!(!hw["lab-node-1"].how.is_empty());
    let e = relabelled_hardware(&source, &[relabel("lab-node-2=container")]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("relabel: no node \"lab-node-2\" in the files"),
        "{e}"
    );
    assert!(e.to_string().contains("lab-node-1"), "{e}");
    let e = relabelled_hardware(&source, &[relabel("cpu-1=container")]).unwrap_err();
    assert!(
        e.to_string()
            .contains("relabel cpu-1: the node's GPUs cannot be worked out"),
        "{e}"
    );
}

#[test]
fn label_patch_removes_with_null_and_sets_only_what_changed() {
    let before = BTreeMap::from([
        ("a".to_string(), "1".to_string()),
        ("gone".to_string(), "x".to_string()),
        ("same".to_string(), "s".to_string()),
    ]);
    let after = BTreeMap::from([
        ("a".to_string(), "2".to_string()),
        ("new".to_string(), "n".to_string()),
        ("same".to_string(), "s".to_string()),
    ]);
    assert_eq!(
        serde_json::Value::Object(label_patch(&before, &after)),
        serde_json::json!({"a": "2", "gone": null, "new": "n"})
    );
    assert!(label_patch(&before, &before).is_empty());
}
