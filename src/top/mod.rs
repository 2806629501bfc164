//! `joiner top`: a live, read-only view of a cluster, what it costs, and what joiner would do now.
//! Layers, one way: [`watch`] (the adapter) keeps the controller's reflector caches and builds a
//! snapshot from them as the controller does; [`decide`] makes the decisions on it with the pure
//! decision core (the pending pods' plan, consolidation, the re-packing bound), off the UI thread
//! and under short time limits; [`model`] turns snapshot and decisions into a [`model::Frame`] and
//! holds the view state (sort, NodePool filter, selection), both pure; [`render`] draws a frame
//! with ratatui, for the terminal and for `--once -o table`. Nothing here writes to the cluster.

pub mod decide;
pub mod model;
pub mod render;
pub mod watch;

/// Failures of the view outside the decisions (which become a frame's notes).
#[derive(Debug, thiserror::Error)]
pub enum TopError {
    #[error(transparent)]
    Kubernetes(#[from] crate::k8s::K8sError),
    /// The OS error is in the message, not a `source` (which `main` would print again).
    #[error("cannot start the watch thread: {0}")]
    Thread(std::io::Error),
    #[error("terminal: {0}")]
    Terminal(std::io::Error),
    #[error("the watch failed: {0}")]
    Watch(String),
    #[error("no frame within {0:?}: the caches did not sync")]
    NoFrame(std::time::Duration),
}
