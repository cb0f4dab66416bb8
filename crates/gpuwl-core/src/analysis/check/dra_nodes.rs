//! The DRA facts `check` (and `explain`'s unused-GPU rules) read: which nodes NVIDIA's DRA
//! driver publishes devices on, and which extended resource names DeviceClasses offer.
//! The finding made from them is the checker's ([`DraNodes::finding`] in
//! [`crate::analysis::check`]).

use std::collections::BTreeMap;

use crate::analysis::dra::Matcher;
use crate::model::dra::{DraObjects, RequestSpec};

/// The DRA facts `check` uses: per node, the devices NVIDIA's DRA driver
/// ([`NVIDIA_GPU_DRIVER`]) publishes there, and the extended resource names DeviceClasses
/// offer through DRA (`spec.extendedResourceName`: a pod requesting that name is served
/// from the class's devices; kubernetes/kubernetes
/// `staging/src/k8s.io/api/resource/v1/types.go`, `DeviceClassSpec.ExtendedResourceName`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DraNodes {
    /// Node → number of devices (all types) NVIDIA's DRA driver publishes there.
    pub devices: BTreeMap<String, usize>,
    /// Extended resource name → the DeviceClass that advertises it through DRA.
    pub extended_names: BTreeMap<String, String>,
    /// Node → extended resource name → devices there that the DeviceClass offering the
    /// name selects: the node is judged as advertising that many units of the name.
    pub extended_by_node: BTreeMap<String, BTreeMap<String, usize>>,
}

/// The DRA driver of NVIDIA/k8s-dra-driver-gpu (its `DriverName`, `gpu.nvidia.com`).
pub(crate) const NVIDIA_GPU_DRIVER: &str = "gpu.nvidia.com";

impl DraNodes {
    /// Node → number of devices (all types) NVIDIA's DRA driver ([`NVIDIA_GPU_DRIVER`])
    /// publishes there, from its ResourceSlices: the cheap part of
    /// [`DraNodes::from_objects`].
    pub(crate) fn device_counts(dra: &DraObjects) -> BTreeMap<String, usize> {
        let mut devices = BTreeMap::new();
        for s in dra
            .resource_slices
            .iter()
            .filter(|s| s.driver == NVIDIA_GPU_DRIVER)
        {
            for d in &s.devices {
                if let Some(n) = d.node_name.as_ref().or(s.node_name.as_ref()) {
                    *devices.entry(n.clone()).or_insert(0usize) += 1;
                }
            }
        }
        devices
    }

    /// From DRA objects read.
    pub fn from_objects(dra: &DraObjects) -> DraNodes {
        let devices = DraNodes::device_counts(dra);
        let extended_names = dra
            .device_classes
            .iter()
            .filter_map(|c| {
                c.extended_resource_name
                    .clone()
                    .map(|e| (e, c.name.clone()))
            })
            .collect();
        let m = Matcher::new(dra);
        let mut extended_by_node: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        for c in &dra.device_classes {
            let Some(e) = &c.extended_resource_name else {
                continue;
            };
            let spec = RequestSpec {
                subrequest: None,
                device_class: c.name.clone(),
                selectors: Vec::new(),
                all: false,
                count: 1,
            };
            for i in m.matching(dra, &spec).0 {
                if let Some(n) = m.devices[i].node {
                    *extended_by_node
                        .entry(n.to_owned())
                        .or_default()
                        .entry(e.clone())
                        .or_insert(0) += 1;
                }
            }
        }
        DraNodes {
            devices,
            extended_names,
            extended_by_node,
        }
    }
}
