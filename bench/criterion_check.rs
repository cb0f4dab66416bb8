//! In-process benchmarks: quantity parsing, resource classification, the streaming dump
//! reader on an in-memory dump, and reader + checker together (what `gpuwl check FILE`
//! does minus the file I/O). Run: `cargo bench --bench check`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gpuwl_core::analysis::check::{Checker, Options};
use gpuwl_core::decode::dump::read_from;
use gpuwl_core::model::quantity::Quantity;
use gpuwl_core::model::resource::Classifier;

#[allow(dead_code)]
#[path = "gen.rs"]
mod r#gen;

fn dump(nodes: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    r#gen::generate(nodes, 1, 2.0, false, &mut buf, None).expect("generate");
    buf
}

fn quantities(c: &mut Criterion) {
    let qs = [
        "8",
        "0",
        "110",
        "1073216492Ki",
        "95736m",
        "16Gi",
        "1.5",
        "2e3",
        "100M",
    ];
    let mut g = c.benchmark_group("quantity");
    g.throughput(Throughput::Elements(qs.len() as u64));
    g.bench_function("parse 9 typical", |b| {
        b.iter(|| {
            for q in qs {
                black_box(Quantity::parse(black_box(q)).ok());
            }
        })
    });
    g.finish();
}

fn classification(c: &mut Criterion) {
    let names = [
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.10gb",
        "nvidia.com/GA102GL_A10",
        "nvidia.com/NVIDIA_A10-12Q",
        "nvidia.com/AD102GL_L40S",
        "nvidia.com/rdma_shared_device_a",
        "nvidia.com/26b5",
        "cpu",
    ];
    let cl = Classifier::default();
    let mut g = c.benchmark_group("classify");
    g.throughput(Throughput::Elements(names.len() as u64));
    g.bench_function("8 names", |b| {
        b.iter(|| {
            for n in names {
                black_box(cl.classify(black_box(n)));
            }
        })
    });
    g.finish();
}

fn reader(c: &mut Criterion) {
    let data = dump(500);
    let mut g = c.benchmark_group("dump-500-nodes");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.sample_size(20);
    g.bench_function("stream reader only", |b| {
        b.iter(|| {
            let mut n = 0usize;
            read_from(&data[..], "bench", |node| n += node.labels.len()).unwrap();
            black_box(n)
        })
    });
    g.bench_function("reader + checker", |b| {
        b.iter(|| {
            let mut ck = Checker::new(&Options::default());
            read_from(&data[..], "bench", |node| ck.add(&node)).unwrap();
            black_box(ck.finish().labelled)
        })
    });
    g.bench_function("serde_json IgnoredAny (parse floor)", |b| {
        b.iter(|| {
            let v: serde::de::IgnoredAny = serde_json::from_slice(&data).unwrap();
            black_box(v)
        })
    });
    g.bench_function("serde_json::from_reader IgnoredAny", |b| {
        b.iter(|| {
            let v: serde::de::IgnoredAny = serde_json::from_reader(&data[..]).unwrap();
            black_box(v)
        })
    });
    g.finish();
}

criterion_group!(benches, quantities, classification, reader);
criterion_main!(benches);
