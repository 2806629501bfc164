//! joiner: a Kubernetes node autoscaler that plans EC2 capacity as a mixed-integer program.
//!
//! Data flows one way through the layers: `snapshot` reads Kubernetes objects into `domain` types,
//! `catalog` supplies instance types and offerings, `optimizer` turns both into a `Plan` and
//! `disruption` into a `DisruptionPlan` (values). The decision core (`domain`, `catalog`,
//! `optimizer`, `disruption`) is pure and synchronous and knows nothing of Kubernetes or AWS
//! clients. `controller` carries plans out through two traits, `controller::Cluster` and
//! `cloud::CloudProvider`; `sim` hosts it on a simulated cluster and cloud; `cli` is the command line.
//!
//! The `cluster` feature (on by default) adds what talks to a real cluster and cloud: `k8s`, `operator`
//! and `cloud::aws`. Without it the crate is the decision core, the simulator and the parsers.

pub mod api;
pub mod catalog;
pub mod cloud;
pub mod controller;
pub mod disruption;
pub mod domain;
#[cfg(feature = "cluster")]
pub mod k8s;
#[cfg(feature = "cluster")]
pub mod operator;
pub mod optimizer;
pub mod scalein;
pub mod sim;
pub mod snapshot;
#[cfg(feature = "cluster")]
pub mod top;
pub mod verify;
pub mod workload;
