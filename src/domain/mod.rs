//! Domain types of the decision core: quantities, resources, labels and requirements, pods, nodes,
//! NodePools and the cluster snapshot. They hold only what decisions need and carry no Kubernetes
//! or AWS API types; `crate::snapshot` converts API objects into them at the edge, `crate::catalog`
//! supplies the instance offerings, and `crate::optimizer` turns both into plans.

pub mod cluster;
pub mod labels;
pub mod pod;
pub mod quantity;
pub mod resources;
pub mod volume;
pub mod weights;

pub use cluster::*;
pub use labels::*;
pub use pod::*;
pub use quantity::{Quantity, QuantityError};
pub use resources::Resources;
pub use volume::Storage;
pub use weights::CostWeights;
