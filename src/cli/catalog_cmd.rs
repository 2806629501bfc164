//! `joiner catalog build` writes a catalog file from the offline AWS reference data; `joiner
//! catalog live` writes one from the live EC2 APIs (hardware, zone offerings, spot prices) with
//! on-demand prices from the Pricing API or, where it cannot be reached, from the bundled catalog.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Subcommand, ValueEnum};
use joiner::catalog::Catalog;
use joiner::cloud::aws::{discovery, pricing, AwsClients, AwsSettings};

use super::progress::Progress;

#[derive(Debug, Subcommand)]
pub enum CatalogCommand {
    /// Build a catalog JSON for one region from the AWS reference data folder.
    Build {
        /// Folder with instance-types.json, offerings-REGION.json, prices-REGION.json,
        /// spot-advisor.json.
        #[arg(long, env = "JOINER_AWS_DATA")]
        data: PathBuf,
        /// Region whose offerings and prices the catalog holds.
        #[arg(long, default_value = "us-east-1")]
        region: String,
        /// Where to write the catalog.
        #[arg(long)]
        out: PathBuf,
    },
    /// Build a catalog JSON for one region from the live EC2 and Pricing APIs (credentials from the
    /// default chain).
    Live {
        /// Region to discover; every EC2 and Pricing call is made for it.
        #[arg(long, env = "AWS_REGION")]
        region: String,
        /// Where to write the catalog.
        #[arg(long)]
        out: PathBuf,
        /// One endpoint for every AWS service (an emulator, a VPC endpoint proxy).
        #[arg(long)]
        endpoint_url: Option<String>,
        /// Where on-demand prices come from.
        #[arg(long, value_enum, default_value = "pricing-api")]
        on_demand: OnDemandSource,
    },
}

/// The source of on-demand prices for `catalog live`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnDemandSource {
    /// The AWS Price List API (GetProducts), as Karpenter reads it.
    PricingApi,
    /// The bundled catalog of the region: for isolated VPCs without a route to the Pricing API.
    Bundled,
}

pub fn run(cmd: CatalogCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        CatalogCommand::Build { data, region, out } => {
            let (catalog, report) = joiner::catalog::build::build_catalog(&data, &region)?;
            let text = joiner::catalog::build::to_pretty_json(&catalog)?;
            std::fs::write(&out, text).with_context(|| format!("writing {}", out.display()))?;
            eprintln!("{report}");
            Ok(ExitCode::SUCCESS)
        }
        CatalogCommand::Live {
            region,
            out,
            endpoint_url,
            on_demand,
        } => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            let mut progress = Progress::start(
                "catalog live",
                3,
                &format!("discovering the catalog of {region} from the AWS APIs"),
            );
            let catalog =
                runtime.block_on(live(&region, endpoint_url, on_demand, &mut progress))?;
            std::fs::write(&out, joiner::catalog::build::to_pretty_json(&catalog)?)
                .with_context(|| format!("writing {}", out.display()))?;
            progress.finish(&format!(
                "wrote {} ({} instance types)",
                out.display(),
                catalog.instance_types.len()
            ));
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn live(
    region: &str,
    endpoint_url: Option<String>,
    source: OnDemandSource,
    progress: &mut Progress,
) -> anyhow::Result<Catalog> {
    let mut settings = AwsSettings::new(region, "", "");
    settings.endpoint_url = endpoint_url;
    settings.isolated_vpc = source == OnDemandSource::Bundled;
    progress.phase("loading AWS credentials and clients");
    let clients = AwsClients::load(&settings).await?;
    progress.phase(match source {
        OnDemandSource::PricingApi => "on-demand prices from the Pricing API (GetProducts)",
        OnDemandSource::Bundled => "on-demand prices from the bundled catalog",
    });
    let (on_demand, origin) = on_demand_prices(&clients, region, source).await?;
    progress.phase_done(&format!("{} on-demand prices", on_demand.len()));
    progress.phase("instance types, zone offerings and spot prices from EC2");
    let (mut catalog, report) = discovery::discover(&clients, region, &on_demand).await?;
    progress.phase_done(&format!("{} instance types", catalog.instance_types.len()));
    eprintln!("{report}");
    if let Some(p) = catalog.provenance.as_mut() {
        p["sources"]["on_demand"] = origin.into();
        p["discovered_at"] = chrono::Utc::now()
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            .into();
    }
    Ok(catalog)
}

/// The on-demand prices of `region` and a line saying where they came from.
async fn on_demand_prices(
    clients: &AwsClients,
    region: &str,
    source: OnDemandSource,
) -> anyhow::Result<(BTreeMap<String, f64>, String)> {
    match source {
        OnDemandSource::PricingApi => {
            let (prices, report) = pricing::on_demand_prices(&clients.pricing, region).await?;
            eprintln!("{report}");
            let origin = format!(
                "AWS Price List API GetProducts (AmazonEC2, Linux, shared tenancy and bare \
                metal), {} types",
                prices.len()
            );
            Ok((prices, origin))
        }
        OnDemandSource::Bundled => {
            let prices = discovery::on_demand_prices_of(&Catalog::bundled(region)?);
            eprintln!(
                "on-demand prices {region}: {} types from the bundled catalog",
                prices.len()
            );
            let origin = format!(
                "the bundled catalog of {region} (--on-demand bundled), {} types",
                prices.len()
            );
            Ok((prices, origin))
        }
    }
}
