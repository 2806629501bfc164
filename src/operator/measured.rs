//! A cloud provider wrapped with metrics: every call's duration, and its errors by kind.

use std::sync::Arc;
use std::time::Instant;

use super::metrics::{ErrorLabels, MethodLabels, Metrics};
use crate::catalog::Catalog;
use crate::cloud::{CloudError, CloudProvider, Instance, LaunchRequest, Launched};

pub struct Measured<P> {
    pub inner: P,
    metrics: Arc<Metrics>,
}

impl<P> Measured<P> {
    pub fn new(inner: P, metrics: Arc<Metrics>) -> Self {
        Measured { inner, metrics }
    }

    fn record<T>(&self, method: &'static str, started: Instant, result: &Result<T, CloudError>) {
        self.metrics
            .cloud_duration
            .get_or_create(&MethodLabels { method })
            .observe(started.elapsed().as_secs_f64());
        if let Err(e) = result {
            let error = match e {
                CloudError::InsufficientCapacity { .. } => "insufficient-capacity",
                CloudError::NotFound(_) => "not-found",
                CloudError::NoOfferings(_) => "no-offerings",
                CloudError::Provider(_) => "provider",
            };
            self.metrics
                .cloud_errors
                .get_or_create(&ErrorLabels { method, error })
                .inc();
        }
    }
}

impl<P: CloudProvider> CloudProvider for Measured<P> {
    async fn launch(&self, request: &LaunchRequest) -> Result<Launched, CloudError> {
        let started = Instant::now();
        let r = self.inner.launch(request).await;
        self.record("launch", started, &r);
        r
    }

    fn launch_concurrency(&self) -> usize {
        self.inner.launch_concurrency()
    }

    async fn delete(&self, id: &str) -> Result<(), CloudError> {
        let started = Instant::now();
        let r = self.inner.delete(id).await;
        self.record("delete", started, &r);
        r
    }

    async fn get(&self, id: &str) -> Result<Instance, CloudError> {
        let started = Instant::now();
        let r = self.inner.get(id).await;
        self.record("get", started, &r);
        r
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        let started = Instant::now();
        let r = self.inner.list().await;
        self.record("list", started, &r);
        r
    }

    async fn catalog(&self) -> Result<Catalog, CloudError> {
        let started = Instant::now();
        let r = self.inner.catalog().await;
        self.record("catalog", started, &r);
        r
    }

    async fn drifted(&self, id: &str) -> Result<Option<String>, CloudError> {
        let started = Instant::now();
        let r = self.inner.drifted(id).await;
        self.record("drifted", started, &r);
        r
    }
}
