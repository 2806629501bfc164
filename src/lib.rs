//! joiner: a Kubernetes node autoscaler that plans EC2 capacity as a mixed-integer program.
//!
//! Data flows one way through the layers: `snapshot` reads Kubernetes objects into `domain` types,
//! `catalog` supplies instance types and offerings, `optimizer` turns both into a `Plan` (a value),
//! and `cli` prints or writes it. The decision core (`domain`, `catalog`, `optimizer`) is pure and
//! synchronous and knows nothing of Kubernetes or AWS clients.

pub mod catalog;
pub mod cloud;
pub mod disruption;
pub mod domain;
pub mod optimizer;
pub mod scalein;
pub mod sim;
pub mod snapshot;
pub mod workload;
